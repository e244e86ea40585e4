"""HTTP spans in the stable semantic conventions: the FastAPI SERVER and httpx CLIENT spans a
process exports carry `http.request.method`, `http.response.status_code`, `server.address`,
`url.*`, never the old names (`http.method`, `http.status_code`, `net.peer.ip`), because the
telemetry setup opts in (`OTEL_SEMCONV_STABILITY_OPT_IN=http`) before anything instruments.

The instrumentations read the opt-in once per process, so each case runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from turnout.observability.tracing import SEMCONV_OPT_IN_ENV, opt_in_stable_http

SCRIPT = """
import asyncio, json
from types import SimpleNamespace

import httpx
from fastapi import FastAPI
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from turnout.observability.tracing import setup_tracing
from turnout_ingress.observability import install

spans = InMemorySpanExporter()
telemetry = setup_tracing("turnout-ingress", env={}, span_exporters=[spans])
app = FastAPI()


@app.get("/v1/models")
async def models() -> dict[str, list[str]]:
    return {"data": []}


install(app, SimpleNamespace(obs=SimpleNamespace(telemetry=telemetry)))


async def main() -> None:
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw.test:8080")
    HTTPXClientInstrumentor.instrument_client(client, tracer_provider=telemetry.tracer_provider)
    assert (await client.get("/v1/models")).status_code == 200
    await client.aclose()


asyncio.run(main())
print(json.dumps([{"kind": s.kind.name, "attributes": dict(s.attributes or {})} for s in spans.get_finished_spans()]))
"""

OLD_NAMES = {
    "http.method",
    "http.status_code",
    "http.url",
    "http.target",
    "http.scheme",
    "net.peer.ip",
    "net.host.name",
}
NEW_NAMES = {"http.request.method", "http.response.status_code", "url.path"}


def _spans(opt_in: str | None) -> dict[str, dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if k != SEMCONV_OPT_IN_ENV and not k.startswith("OTEL_")}
    if opt_in is not None:
        env[SEMCONV_OPT_IN_ENV] = opt_in
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    spans = json.loads(done.stdout.splitlines()[-1])
    # the server span is the one with a route (INTERNAL here: the client's span is current in-process)
    return {"server" if "http.route" in s["attributes"] else s["kind"]: s["attributes"] for s in spans}


def test_server_and_client_spans_carry_only_the_stable_http_names() -> None:
    spans = _spans(None)
    server, client = spans["server"], spans["CLIENT"]
    for attributes in (server, client):
        assert NEW_NAMES - {"url.path"} <= set(attributes) and not OLD_NAMES & set(attributes)
        assert attributes["http.request.method"] == "GET" and attributes["http.response.status_code"] == 200
    assert server["url.path"] == "/v1/models" and server["http.route"] == "/v1/models" and "server.address" in server
    assert client["server.address"] == "gw.test" and client["server.port"] == 8080
    assert client["url.full"] == "http://gw.test:8080/v1/models"


def test_an_operators_own_opt_in_is_kept() -> None:
    server = _spans("http/dup")["server"]
    assert {"http.method", "http.request.method"} <= set(server)


@pytest.mark.parametrize(("before", "after"), [({}, "http"), ({SEMCONV_OPT_IN_ENV: "http/dup"}, "http/dup")])
def test_the_opt_in_is_set_only_when_unset(before: dict[str, str], after: str) -> None:
    environ = dict(before)
    opt_in_stable_http(environ)
    assert environ[SEMCONV_OPT_IN_ENV] == after
