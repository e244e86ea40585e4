"""The container files hold what `scripts/image-check` cannot show on a machine with no builder.

Dockerfile: built from the wheel in a first stage, a final stage with a non-root
user and the one HEALTHCHECK (`turnout healthcheck`). infra/compose.yaml: the
image for the simulator, ingress and workers; Redis with AOF on, its data in a
volume; the catalog it mounts exists and routes to the simulator (no keys).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]


def test_dockerfile_builds_the_wheel_in_a_stage_and_runs_as_a_user_with_a_healthcheck() -> None:
    text = (ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM .*$", text, re.MULTILINE)
    assert stages == ["FROM ${PYTHON_IMAGE} AS build", "FROM ${PYTHON_IMAGE}"]
    build, final = text.split(f"\n{stages[1]}\n", 1)
    assert "pip wheel" in build and "--require-hashes" in build
    assert "COPY --from=build /opt/turnout /opt/turnout" in final
    assert re.search(r"^USER turnout$", final, re.MULTILINE)
    assert 'CMD ["turnout", "healthcheck"]' in final
    assert final.rstrip().endswith('CMD ["turnout", "ingress"]')


def _compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "infra" / "compose.yaml").read_text())
    assert isinstance(data, dict)
    return data


def test_compose_runs_the_image_with_redis_aof_on_a_volume() -> None:
    services = _compose()["services"]
    redis = services["redis"]
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert any(volume.endswith(":/data") for volume in redis["volumes"])
    for name, role in (("sim", "sim"), ("ingress", "ingress"), ("worker", "worker")):
        service = services[name]
        assert service["image"] == "turnout:0.1.0" and service["build"]["context"] == ".."
        assert service["command"][:2] == ["turnout", role]
    for name in ("ingress", "worker"):
        assert services[name]["depends_on"]["redis"] == {"condition": "service_healthy"}
        (mount,) = services[name]["volumes"]
        catalog = yaml.safe_load((ROOT / "infra" / mount.split(":")[0]).read_text())
        assert all(p["base_url"].startswith("http://sim:9100") for p in catalog["providers"].values())


def _build_only_packages() -> set[str]:
    """The runtime lock's packages there only for the build backend: hatchling and what only it needs."""
    text = (ROOT / "requirements.lock").read_text()
    via: dict[str, set[str]] = {}
    for block in re.split(r"\n(?=[a-z0-9][a-z0-9._-]*==)", text):
        name = block.split("==", 1)[0].strip()
        via[name] = set(re.findall(r"#\s+(?:via\s+)?([a-z0-9][a-z0-9._-]*)\s*$", block, re.MULTILINE)) - {"via"}
    return {"hatchling"} | {name for name, parents in via.items() if parents == {"hatchling"}}


def test_the_image_removes_exactly_the_build_backend_and_what_only_it_needs() -> None:
    text = (ROOT / "Dockerfile").read_text()
    removed = re.search(r"pip uninstall -q -y ((?:hatchling|[a-z-]+ )+[a-z-]+)", text)
    assert removed is not None
    assert set(removed.group(1).split()) == _build_only_packages()
