"""The Kubernetes manifests in `infra/k8s/` parse and agree with the code.

No cluster is needed: every manifest is parsed (multi-document YAML), the
kinds are the expected ones, the probes point at routes the ingress app
really serves, the container commands are real `turnout` subcommands, the
configuration in the ConfigMap validates, and the names that tie the objects
together (Services, Secret, Redis URL, KEDA queue, OTLP endpoint) match.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from turnout.config import parse_config
from turnout.state import keys
from turnout_cli.main import build_parser
from turnout_ingress.app import create_app

K8S = Path(__file__).resolve().parents[2] / "infra" / "k8s"
NAMESPACE = "turnout"
EXPECTED_KINDS = Counter(
    {
        "Namespace": 1,
        "ConfigMap": 2,  # turnout.yaml, collector config
        "Service": 3,  # ingress, redis (headless), collector
        "Deployment": 3,  # ingress, worker, collector
        "StatefulSet": 1,  # redis
        "HorizontalPodAutoscaler": 1,  # ingress (the workers' HPA is KEDA's)
        "PodDisruptionBudget": 2,
        "ScaledObject": 1,
    }
)


Doc = dict[str, Any]


def _load(path: Path) -> list[Doc]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


@pytest.fixture(scope="module")
def kustomization() -> Doc:
    docs = _load(K8S / "kustomization.yaml")
    assert len(docs) == 1
    return docs[0]


@pytest.fixture(scope="module")
def docs(kustomization: Doc) -> list[Doc]:
    out: list[Doc] = []
    for name in kustomization["resources"]:
        out.extend(_load(K8S / name))
    return out


def _one(docs: list[Doc], kind: str, name: str) -> Doc:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind}/{name}, found {len(found)}"
    return found[0]


def _containers(doc: Doc) -> list[Doc]:
    return list(doc["spec"]["template"]["spec"]["containers"])


def _env(container: Doc) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def _turnout_containers(docs: list[Doc]) -> list[tuple[Doc, Doc]]:
    return [
        (d, c)
        for d in docs
        if d["kind"] in ("Deployment", "StatefulSet")
        for c in _containers(d)
        if c["image"].split(":")[0] == "turnout"
    ]


@pytest.fixture(scope="module")
def config_text(docs: list[Doc]) -> str:
    return str(_one(docs, "ConfigMap", "turnout-config")["data"]["turnout.yaml"])


@pytest.fixture(scope="module")
def secret_keys() -> set[str]:
    (secret,) = _load(K8S / "secret.example.yaml")
    assert secret["kind"] == "Secret" and secret["metadata"]["name"] == "turnout-secrets"
    return set(secret["stringData"])


def _config_env(config_text: str) -> dict[str, str]:
    return {name: f"test-value-for-{name.lower()}" for name in re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", config_text)}


def test_every_yaml_file_parses_and_every_manifest_is_listed(kustomization: Doc) -> None:
    files = sorted(p.name for p in K8S.glob("*.yaml"))
    for name in files:
        for doc in _load(K8S / name):
            assert isinstance(doc, dict) and "kind" in doc and "apiVersion" in doc, name
    listed = set(kustomization["resources"])
    assert listed <= set(files)
    # everything but the kustomization and the example Secret is deployed
    assert set(files) - listed == {"kustomization.yaml", "secret.example.yaml"}
    assert kustomization["namespace"] == NAMESPACE


def test_kinds_names_and_namespace(docs: list[Doc]) -> None:
    assert Counter(d["kind"] for d in docs) == EXPECTED_KINDS
    names = [(d["kind"], d["metadata"]["name"]) for d in docs]
    assert len(names) == len(set(names)), "duplicate kind/name"
    for d in docs:
        if d["kind"] != "Namespace":
            assert d["metadata"]["namespace"] == NAMESPACE, d["metadata"]["name"]
    api = {d["kind"]: d["apiVersion"] for d in docs}
    assert api["Deployment"] == "apps/v1" and api["StatefulSet"] == "apps/v1"
    assert api["HorizontalPodAutoscaler"] == "autoscaling/v2"
    assert api["ScaledObject"] == "keda.sh/v1alpha1"
    assert api["PodDisruptionBudget"] == "policy/v1"


def test_configmap_config_validates_and_its_variables_come_from_the_secret(
    docs: list[Doc], config_text: str, secret_keys: set[str]
) -> None:
    env = _config_env(config_text)
    assert "OPENAI_API_KEY" in env
    config = parse_config(config_text, env=env, source="configmap turnout.yaml")
    assert config.raw.providers["openai"].api_key == env["OPENAI_API_KEY"]
    assert config.raw.orgs, "the ConfigMap must declare at least one org with keys"
    for workload, container in _turnout_containers(docs):
        refs = {r["secretRef"]["name"] for r in container.get("envFrom", []) if "secretRef" in r}
        assert refs == {"turnout-secrets"}, workload["metadata"]["name"]
        provided = secret_keys | set(_env(container))
        missing = set(env) - provided
        assert not missing, f"{workload['metadata']['name']}: ${{...}} not provided: {sorted(missing)}"
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        config_path = _env(container)["TURNOUT_CONFIG"]
        volume_name = mounts[str(Path(config_path).parent)]
        volume = next(v for v in workload["spec"]["template"]["spec"]["volumes"] if v["name"] == volume_name)
        assert volume["configMap"]["name"] == "turnout-config"
        assert Path(config_path).name == "turnout.yaml"


def test_container_commands_are_real_turnout_subcommands(docs: list[Doc]) -> None:
    parser = build_parser()
    seen = {}
    for workload, container in _turnout_containers(docs):
        command = container["command"]
        assert command[0] == "turnout", command
        try:
            args = parser.parse_args(command[1:])
        except SystemExit as exc:  # argparse exits on an unknown subcommand or option
            pytest.fail(f"{workload['metadata']['name']}: not a valid turnout command {command}: exit {exc.code}")
        seen[workload["metadata"]["name"]] = args
    assert seen["turnout-ingress"].command == "ingress"
    assert seen["turnout-worker"].command == "worker"
    ingress = seen["turnout-ingress"]
    assert ingress.host == "0.0.0.0"
    port = _containers(_one(docs, "Deployment", "turnout-ingress"))[0]["ports"][0]
    assert port["containerPort"] == ingress.port


def test_probes_point_at_routes_the_ingress_really_serves(docs: list[Doc], config_text: str) -> None:
    config = parse_config(config_text, env=_config_env(config_text))
    app = create_app(config, redis_url="redis://127.0.0.1:1/0")  # builds routes; connects nothing
    routes: dict[str | None, set[str]] = {getattr(r, "path", None): getattr(r, "methods", set()) for r in app.routes}
    deployment = _one(docs, "Deployment", "turnout-ingress")
    (container,) = _containers(deployment)
    port_names = {p["name"]: p["containerPort"] for p in container["ports"]}
    probes = {k: container[k] for k in ("startupProbe", "livenessProbe", "readinessProbe") if k in container}
    assert probes["livenessProbe"]["httpGet"]["path"] == "/health/liveness"
    assert probes["readinessProbe"]["httpGet"]["path"] == "/health/readiness"
    for kind, probe in probes.items():
        path = probe["httpGet"]["path"]
        assert path in routes and "GET" in routes[path], f"{kind} {path} is not a GET route of the app"
        assert probe["httpGet"]["port"] in port_names or probe["httpGet"]["port"] in port_names.values()
    scrape = deployment["spec"]["template"]["metadata"]["annotations"]
    assert scrape["prometheus.io/path"] in routes
    assert int(scrape["prometheus.io/port"]) == port_names["http"]


def test_ingress_deployment_drains_and_is_sized(docs: list[Doc]) -> None:
    deployment = _one(docs, "Deployment", "turnout-ingress")
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert deployment["spec"]["replicas"] == 2
    assert spec["terminationGracePeriodSeconds"] == 30
    assert container["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "5"]
    assert container["resources"]["requests"] == {"cpu": "250m", "memory": "128Mi"}
    assert container["resources"]["limits"]["memory"] == "512Mi"
    hpa = _one(docs, "HorizontalPodAutoscaler", "turnout-ingress")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "turnout-ingress"}
    assert hpa["spec"]["minReplicas"] >= 2
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]


def test_worker_deployment_drains_exports_metrics_and_scales_on_the_queue(docs: list[Doc], config_text: str) -> None:
    deployment = _one(docs, "Deployment", "turnout-worker")
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    env = _env(container)
    assert int(env["TURNOUT_DRAIN_S"]) == 25 < spec["terminationGracePeriodSeconds"] == 30
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == env["TURNOUT_METRICS_PORT"] == "9464"
    assert env["TURNOUT_METRICS_HOST"] == "0.0.0.0"
    assert {p["containerPort"] for p in container["ports"]} == {9464}
    assert container["resources"]["requests"] == {"cpu": "250m", "memory": "128Mi"}
    assert not any(
        d["kind"] == "HorizontalPodAutoscaler" and d["spec"]["scaleTargetRef"]["name"] == "turnout-worker" for d in docs
    ), "KEDA owns the worker HPA"
    scaled = _one(docs, "ScaledObject", "turnout-worker")
    assert scaled["spec"]["scaleTargetRef"]["name"] == "turnout-worker"
    (redis_trigger,) = [t for t in scaled["spec"]["triggers"] if t["type"] == "redis"]
    meta = redis_trigger["metadata"]
    assert meta["listName"] == keys.QUEUE  # arq's sorted set: the ingress's max_queue_depth counts the same
    assert meta["address"].split(".")[0] == "turnout-redis" and meta["address"].endswith(":6379")
    config = parse_config(config_text, env=_config_env(config_text))
    assert 0 < int(meta["listLength"]) <= config.raw.gateway.worker_max_jobs


def test_redis_statefulset_persists_with_aof_and_everyone_points_at_it(docs: list[Doc]) -> None:
    sts = _one(docs, "StatefulSet", "turnout-redis")
    (container,) = _containers(sts)
    args = container["command"]
    assert args[0] == "redis-server"
    pairs = dict(zip(args[1::2], args[2::2]))
    assert pairs["--appendonly"] == "yes" and pairs["--appendfsync"] == "everysec"
    assert pairs["--maxmemory-policy"] == "noeviction"
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert {"name": claim["metadata"]["name"], "mountPath": pairs["--dir"]} in container["volumeMounts"]
    service = _one(docs, "Service", sts["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None"
    for workload, c in _turnout_containers(docs):
        url = urlsplit(_env(c)["TURNOUT_REDIS_URL"])
        assert (url.scheme, url.hostname, url.port) == ("redis", service["metadata"]["name"], 6379), workload


def test_services_select_pods_and_target_declared_ports(docs: list[Doc]) -> None:
    workloads = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]
    for service in (d for d in docs if d["kind"] == "Service"):
        selector = service["spec"]["selector"]
        matches = [w for w in workloads if selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()]
        assert len(matches) == 1, f"Service {service['metadata']['name']} selects {len(matches)} workloads"
        ports = {p["name"] for c in _containers(matches[0]) for p in c.get("ports", [])}
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in ports, f"{service['metadata']['name']}: no container port {port['targetPort']}"
    for workload in workloads:
        assert (
            workload["spec"]["selector"]["matchLabels"].items()
            <= workload["spec"]["template"]["metadata"]["labels"].items()
        )
    for pdb in (d for d in docs if d["kind"] == "PodDisruptionBudget"):
        assert any(
            pdb["spec"]["selector"]["matchLabels"].items() <= w["spec"]["template"]["metadata"]["labels"].items()
            for w in workloads
        )


def test_otel_collector_receives_otlp_and_the_gateway_sends_there(docs: list[Doc]) -> None:
    config = yaml.safe_load(_one(docs, "ConfigMap", "turnout-otel-collector")["data"]["config.yaml"])
    assert set(config["receivers"]["otlp"]["protocols"]) == {"grpc", "http"}
    for pipeline in config["service"]["pipelines"].values():
        assert pipeline["receivers"] == ["otlp"]
        assert "debug" in pipeline["exporters"]
        assert set(pipeline["exporters"]) <= set(config["exporters"])
        assert set(pipeline["processors"]) <= set(config["processors"])
    assert "otlp" in config["service"]["pipelines"]["traces"]["exporters"]
    service = _one(docs, "Service", "turnout-otel-collector")
    http_port = next(p["port"] for p in service["spec"]["ports"] if p["name"] == "otlp-http")
    for workload, container in _turnout_containers(docs):
        env = _env(container)
        endpoint = urlsplit(env["OTEL_EXPORTER_OTLP_ENDPOINT"])
        assert (endpoint.hostname, endpoint.port) == ("turnout-otel-collector", http_port), workload["metadata"]["name"]
        assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
        assert env["OTEL_TRACES_EXPORTER"] == "otlp"
