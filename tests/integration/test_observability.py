"""Observability end to end on a real fleet (redis-server, simulator, ingress, worker).

Both processes write their spans as JSON lines (`TURNOUT_TRACE_FILE`), the
worker serves Prometheus on a side port, and attempt records go to Redis.
A request whose primary answers 503 twice (one retry) and whose second
provider serves must give ONE trace: server -> job (CONSUMER, the queue hop,
carrying the request) -> three attempt spans, with records that match.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.gateway import Gateway, start_gateway
from support.procs import Fleet, free_port, require_redis

pytestmark = pytest.mark.integration

KEY_ACME = "tk-test-obs-acme-00000001"
KEY_ACME_ADMIN = "tk-test-obs-acme-admin-01"
KEY_GLOBEX = "tk-test-obs-globex-000001"
KEY_GLOBEX_ADMIN = "tk-test-obs-globex-admin1"

CONFIG = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
  sim-b: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-b}}
models:
  obs-chain:
    order: priority
    offers:
      - {{provider: sim-a, model: "obs-a~503", input_usd_per_mtok: 1, output_usd_per_mtok: 2}}
      - {{provider: sim-b, model: obs-b, input_usd_per_mtok: 3, output_usd_per_mtok: 4}}
  obs-ok: {{offers: [{{provider: sim-b, model: obs-ok}}]}}
gateway: {{records_max: 1000}}
orgs:
  acme:
    keys:
      - {{name: main, key: {acme}}}
      - {{name: admin, key: {acme_admin}, admin: true}}
  globex:
    keys:
      - {{name: main, key: {globex}}}
      - {{name: admin, key: {globex_admin}, admin: true}}
"""


class ObsGateway:
    """The fleet plus where its telemetry lands."""

    def __init__(self, gw: Gateway, trace_dir: Path, metrics_port: int) -> None:
        self.gw = gw
        self.trace_dir = trace_dir
        self.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"

    def spans(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for path in sorted(self.trace_dir.glob("spans-*.jsonl")):
            out.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
        return out

    def chat(self, key: str, model: str) -> httpx.Response:
        return httpx.post(
            f"{self.gw.base_url}/v1/chat/completions",
            headers={"authorization": f"Bearer {key}"},
            json={"model": model, "messages": [{"role": "user", "content": "hello there"}]},
            timeout=30,
        )

    def export(self, key: str, **params: str) -> httpx.Response:
        return httpx.get(
            f"{self.gw.base_url}/admin/v1/logs/export",
            headers={"authorization": f"Bearer {key}"},
            params=params,
            timeout=30,
        )

    def attempts_total(self) -> float:
        text = httpx.get(self.metrics_url, timeout=5).text
        return sum(
            s.value
            for fam in text_string_to_metric_families(text)
            if fam.name == "turnout_attempts"
            for s in fam.samples
            if s.name == "turnout_attempts_total"
        )


@pytest.fixture(scope="module")
def obs() -> Iterator[ObsGateway]:
    require_redis()
    fleet = Fleet()
    metrics_port = free_port()
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("TURNOUT_TRACE_FILE", str(fleet.workdir / "spans-{service}.jsonl"))
            env.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
            env.setenv("TURNOUT_METRICS_PORT", str(metrics_port))
            gw = start_gateway(
                fleet,
                CONFIG,
                acme=KEY_ACME,
                acme_admin=KEY_ACME_ADMIN,
                globex=KEY_GLOBEX,
                globex_admin=KEY_GLOBEX_ADMIN,
            )
        yield ObsGateway(gw, fleet.workdir, metrics_port)
        gw.close()
    finally:
        fleet.stop_all()


def _eventually(check: Any, timeout_s: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def _jsonl(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.text.splitlines() if line]


def test_retry_and_fallback_give_one_trace_from_ingress_to_each_attempt(obs: ObsGateway) -> None:
    response = obs.chat(KEY_ACME, "obs-chain")
    assert response.status_code == 200, response.text
    assert response.headers["x-turnout-attempts"] == "3"
    rid = response.headers["x-request-id"]

    def trace_spans() -> list[dict[str, Any]]:
        spans = obs.spans()
        ids = {s["trace_id"] for s in spans if s["attributes"].get("turnout.request_id") == rid}
        if len(ids) != 1:
            return []
        found = [s for s in spans if s["trace_id"] in ids]
        servers = [s for s in found if s["kind"] == "SERVER"]
        attempts = [s for s in found if "turnout.attempt.number" in s["attributes"]]
        consumers = [s for s in found if s["kind"] == "CONSUMER"]
        return found if servers and consumers and len(attempts) == 3 else []

    spans = _eventually(trace_spans)
    assert spans, "no complete trace for the request"
    by_id = {s["span_id"]: s for s in spans}
    [server] = [s for s in spans if s["kind"] == "SERVER"]
    [consumer] = [s for s in spans if s["kind"] == "CONSUMER"]
    attempts = sorted(
        (s for s in spans if "turnout.attempt.number" in s["attributes"]),
        key=lambda s: s["attributes"]["turnout.attempt.number"],
    )
    # SERVER, CONSUMER (the queue hop, carrying the request), attempts, the HTTP client span beneath each (SPEC §9)
    assert len(spans) == 2 + 2 * len(attempts)
    http = [s for s in spans if s["name"] == "POST"]
    assert sorted(h["parent_span_id"] for h in http) == sorted(a["span_id"] for a in attempts)
    assert all(h["kind"] == "CLIENT" and h["attributes"]["http.request.method"] == "POST" for h in http)
    assert server["parent_span_id"] is None and server["service"] == "turnout-ingress"
    assert server["attributes"]["turnout.request_id"] == rid
    assert server["attributes"]["http.route"] == "/v1/chat/completions"
    assert server["attributes"]["http.response.status_code"] == 200
    assert consumer["parent_span_id"] == server["span_id"] and consumer["service"] == "turnout-worker"
    assert consumer["attributes"]["turnout.request_id"] == rid
    assert consumer["attributes"]["turnout.requested_model"] == "obs-chain"
    assert [a["parent_span_id"] for a in attempts] == [consumer["span_id"]] * 3
    assert [a["name"] for a in attempts] == ["chat obs-a~503", "chat obs-a~503", "chat obs-b"]
    assert [a["attributes"].get("http.request.resend_count", 0) for a in attempts] == [0, 1, 0]
    assert [a["attributes"].get("turnout.attempt.is_fallback", False) for a in attempts] == [False, False, True]
    assert [a["attributes"].get("error.type") for a in attempts] == ["server_error", "server_error", None]
    assert [a["attributes"]["http.response.status_code"] for a in attempts] == [503, 503, 200]
    assert all(a["kind"] == "CLIENT" and a["attributes"]["server.address"] for a in attempts)
    assert any(e["name"] == "waited" for e in consumer["events"])
    assert all(s["parent_span_id"] is None or s["parent_span_id"] in by_id for s in spans)

    def request_records() -> list[dict[str, Any]]:
        rows = [r for r in _jsonl(obs.export(KEY_ACME_ADMIN)) if r["request_id"] == rid]
        # ended rows are flushed in batches: until then an attempt reads `in_flight`; wait for all three ended
        return rows if len(rows) >= 3 and not any(r["kind"] == "in_flight" for r in rows) else []

    records = _eventually(request_records)
    assert [r["attempt"] for r in records] == [1, 2, 3]
    for record, span in zip(records, attempts):
        attrs = span["attributes"]
        assert record["provider"] == attrs["turnout.provider"]
        assert record["served_model"] == attrs["gen_ai.request.model"]
        assert record["kind"] == attrs["turnout.attempt.kind"] and record["class"] == attrs["turnout.attempt.class"]
        assert record["is_fallback"] == attrs.get("turnout.attempt.is_fallback", False)
        assert record["status"] == attrs["http.response.status_code"]
    assert [r["is_retry"] for r in records] == [False, True, False]
    assert records[2]["cost_usd"] > 0 and records[0]["cost_usd"] == 0
    assert records[2]["output_tokens"] == attempts[2]["attributes"]["gen_ai.usage.output_tokens"]
    assert {r["org"] for r in records} == {"acme"} and {r["key"] for r in records} == {"main"}


def test_a_clients_traceparent_is_continued_by_the_requests_trace(obs: ObsGateway) -> None:
    client_trace, client_span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    response = httpx.post(
        f"{obs.gw.base_url}/v1/chat/completions",
        headers={"authorization": f"Bearer {KEY_ACME}", "traceparent": f"00-{client_trace}-{client_span}-01"},
        json={"model": "obs-chain", "messages": [{"role": "user", "content": "hello there"}]},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    rid = response.headers["x-request-id"]

    def server_span() -> list[dict[str, Any]]:
        return [s for s in obs.spans() if s["kind"] == "SERVER" and s["attributes"].get("turnout.request_id") == rid]

    [server] = _eventually(server_span)
    assert (server["trace_id"], server["parent_span_id"]) == (client_trace, client_span)
    attempts = _eventually(
        lambda: [
            s for s in obs.spans() if s["trace_id"] == client_trace and "turnout.attempt.number" in s["attributes"]
        ]
    )
    assert attempts  # the worker's attempts are in the client's trace too


def test_export_returns_only_the_callers_org(obs: ObsGateway) -> None:
    acme_rid = obs.chat(KEY_ACME, "obs-ok").headers["x-request-id"]
    globex_rid = obs.chat(KEY_GLOBEX, "obs-ok").headers["x-request-id"]
    acme = _eventually(
        lambda: (rows := _jsonl(obs.export(KEY_ACME_ADMIN))) and acme_rid in {r["request_id"] for r in rows} and rows
    )
    globex = _eventually(
        lambda: (
            (rows := _jsonl(obs.export(KEY_GLOBEX_ADMIN))) and globex_rid in {r["request_id"] for r in rows} and rows
        )
    )
    assert {r["org"] for r in acme} == {"acme"} and globex_rid not in {r["request_id"] for r in acme}
    assert {r["org"] for r in globex} == {"globex"} and acme_rid not in {r["request_id"] for r in globex}

    csv_response = obs.export(KEY_GLOBEX_ADMIN, format="csv")
    assert csv_response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(csv_response.text)))
    assert {r["org"] for r in rows} == {"globex"} and globex_rid in {r["request_id"] for r in rows}

    future = obs.export(KEY_GLOBEX_ADMIN, since=str(time.time() + 3600))
    assert _jsonl(future) == []
    assert _jsonl(obs.export(KEY_GLOBEX_ADMIN, until="2000-01-01T00:00:00Z")) == []
    assert obs.export(KEY_GLOBEX).status_code == 403  # not an admin key
    assert obs.export(KEY_GLOBEX_ADMIN, format="xml").status_code == 400
    assert obs.export(KEY_GLOBEX_ADMIN, since="yesterday").status_code == 400


def test_cli_export_writes_the_same_rows(obs: ObsGateway, tmp_path: Path) -> None:
    rid = obs.chat(KEY_GLOBEX, "obs-ok").headers["x-request-id"]
    _eventually(lambda: rid in {r["request_id"] for r in _jsonl(obs.export(KEY_GLOBEX_ADMIN))})
    out = tmp_path / "records.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "turnout_cli.main",
            "logs",
            "export",
            "--url",
            obs.gw.base_url,
            "--key",
            KEY_GLOBEX_ADMIN,
            "--format",
            "jsonl",
            "--since",
            "2000-01-01T00:00:00Z",
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rid in {r["request_id"] for r in rows} and {r["org"] for r in rows} == {"globex"}
    refused = subprocess.run(
        [sys.executable, "-m", "turnout_cli.main", "logs", "export", "--url", obs.gw.base_url, "--key", KEY_GLOBEX],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1 and "403" in refused.stderr and KEY_GLOBEX not in refused.stderr


def test_worker_metrics_endpoint_parses_and_the_attempt_counter_moves(obs: ObsGateway) -> None:
    before = obs.attempts_total()
    assert obs.chat(KEY_ACME, "obs-ok").status_code == 200
    assert obs.attempts_total() == before + 1
    text = httpx.get(obs.metrics_url, timeout=5).text
    names = {fam.name for fam in text_string_to_metric_families(text)}
    assert {
        "turnout_attempts",
        "turnout_upstream_latency_seconds",
        "turnout_in_flight_jobs",
        "turnout_queue_wait_seconds",
        "turnout_fallbacks",
    } <= names


def test_worker_logs_are_json_lines(obs: ObsGateway) -> None:
    worker_log = next(p for p in obs.gw.fleet.procs if p.name.startswith("worker")).log()
    lines = [json.loads(line) for line in worker_log.splitlines() if line.startswith("{")]
    assert any(line.get("message", "").startswith("worker ready") for line in lines)
    assert all(line.get("service") == "turnout-worker" for line in lines)


def test_each_process_freezes_its_start_up_heap_once_started(obs: ObsGateway) -> None:
    """The ingress and the worker, started by the CLI, log the start-up objects they froze
    (`turnout.runtime.freeze_startup_heap`): a whole process's modules and app, thousands."""
    for prefix in ("ingress", "worker"):
        log_text = next(p for p in obs.gw.fleet.procs if p.name.startswith(prefix)).log()
        frozen = [json.loads(line)["message"] for line in log_text.splitlines() if "start-up heap frozen" in line]
        assert len(frozen) == 1, (prefix, frozen)
        assert int(frozen[0].rsplit(": ", 1)[1].split()[0]) > 10_000, frozen
