"""A process that cannot open the catalog's sealed provider keys refuses to start (real processes):
`turnout worker` and `turnout ingress` without the fleet's `TURNOUT_SECRET_KEY` exit 4 with the fix
named, instead of serving and failing every request routed to those providers."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from support.procs import Fleet, free_port, require_redis
from turnout.vault import generate_key

pytestmark = pytest.mark.integration

CONFIG = """\
providers:
  sim-a: {kind: openai_compatible, base_url: "http://127.0.0.1:9/v1", api_key: key-a-0001}
models:
  m: {offers: [{provider: sim-a, model: m}]}
"""

FLEET_KEY = generate_key()


@pytest.fixture(scope="module")
def sealed() -> Iterator[tuple[Fleet, str]]:
    """A Redis whose catalog a worker holding `FLEET_KEY` seeded (the provider key sealed), and that worker."""
    require_redis()
    fleet = Fleet()
    try:
        _, url = fleet.redis()
        (fleet.workdir / "turnout.yaml").write_text(CONFIG)
        fleet.worker(fleet.workdir / "turnout.yaml", url, name="worker-with-key", env={"TURNOUT_SECRET_KEY": FLEET_KEY})
        yield fleet, url
    finally:
        fleet.stop_all()


def _argv(command: str, fleet: Fleet, url: str) -> list[str]:
    argv = [sys.executable, "-m", "turnout_cli.main", command, "--config", str(fleet.workdir / "turnout.yaml")]
    return argv + ["--redis-url", url] + (["--port", str(free_port())] if command == "ingress" else [])


@pytest.mark.parametrize(
    ("command", "secret", "why"),
    [
        ("worker", "", "TURNOUT_SECRET_KEY is not set"),
        ("ingress", "", "TURNOUT_SECRET_KEY is not set"),
        ("worker", generate_key(), "no key in this process's TURNOUT_SECRET_KEY opens them"),
    ],
    ids=["worker-without-key", "ingress-without-key", "worker-with-another-key"],
)
def test_a_process_that_opens_no_sealed_key_refuses_to_start(
    sealed: tuple[Fleet, str], command: str, secret: str, why: str
) -> None:
    fleet, url = sealed
    proc = fleet.spawn(f"{command}-refused", _argv(command, fleet, url), env={"TURNOUT_SECRET_KEY": secret})
    code = proc.popen.wait(timeout=30)
    log = proc.log()
    assert code == 4, log
    assert f"turnout {command} refused to start" in log and "provider(s) sim-a" in log and why in log
    assert ".turnout/secret.key" in log and "TURNOUT_CATALOG_FROM_FILE=1" in log
    assert "key-a-0001" not in log


def test_a_second_process_with_the_fleets_key_starts(sealed: tuple[Fleet, str]) -> None:
    fleet, url = sealed
    worker = fleet.worker(fleet.workdir / "turnout.yaml", url, name="worker-2", env={"TURNOUT_SECRET_KEY": FLEET_KEY})
    assert worker.alive()
