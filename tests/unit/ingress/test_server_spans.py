"""The hot path's SERVER span (`turnout_ingress.observability.ServerSpans`): one span per request with
the stable HTTP semantic-convention attributes, the client's trace continued, errors marked, and a
request the sampler drops served with no attribute built and its (unsampled) context still passed on."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import Request
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from starlette.responses import Response

from turnout.observability.metrics import Metrics
from turnout.observability.telemetry import job_trace
from turnout.observability.tracing import Telemetry, setup_tracing
from turnout_ingress import errors, observability
from turnout_ingress.hot_path import IngressApp
from turnout_ingress.observability import ServerSpans
from turnout_ingress.ops_routes import RouteCounts

PATH = "/v1/chat/completions"
OLD_NAMES = {"http.method", "http.status_code", "http.url", "http.target", "http.scheme", "net.peer.ip"}


class Boom(Exception):
    """An error no handler names."""


def _app(telemetry: Telemetry, carriers: list[dict[str, str]]) -> IngressApp:
    app = IngressApp(docs_url=None, redoc_url=None, redirect_slashes=False)
    errors.install(app)

    async def endpoint(request: Request) -> Response:
        kind = request.headers.get("x-kind", "ok")
        if kind == "boom":
            raise Boom("bug")
        with job_trace("rid-7") as carrier:
            carriers.append(carrier)
        return Response(b"{}", status_code=503 if kind == "503" else 200, headers={"x-request-id": "rid-7"})

    app.add_api_route(PATH, endpoint, methods=["POST"])
    assert telemetry.tracing is not None
    app.serve_hot(RouteCounts(Metrics()), ServerSpans(telemetry.tracing))
    return app


async def _post(app: IngressApp, **headers: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False, client=("10.1.2.3", 5050))
    async with httpx.AsyncClient(transport=transport, base_url="http://gw.test:8080") as client:
        return await client.post(PATH, headers={"user-agent": "sdk/1.0", **headers}, content=b'{"model": "m"}')


def _traced(monkeypatch: pytest.MonkeyPatch, sampler: str | None = None) -> tuple[Telemetry, InMemorySpanExporter]:
    if sampler is not None:
        monkeypatch.setenv("OTEL_TRACES_SAMPLER", sampler)
    else:
        monkeypatch.delenv("OTEL_TRACES_SAMPLER", raising=False)
    spans = InMemorySpanExporter()
    return setup_tracing("turnout-ingress", env={}, span_exporters=[spans]), spans


def _sampled(carrier: dict[str, str]) -> bool:
    """The sampled flag of the W3C `traceparent` in `carrier`."""
    return bool(int(carrier["traceparent"].rsplit("-", 1)[1], 16) & 1)


def _server(spans: InMemorySpanExporter) -> tuple[ReadableSpan, dict[str, Any]]:
    [server] = [s for s in spans.get_finished_spans() if s.kind is SpanKind.SERVER]
    return server, dict(server.attributes or {})


async def test_a_hot_path_request_has_one_server_span_in_the_stable_http_names(monkeypatch: pytest.MonkeyPatch) -> None:
    telemetry, spans = _traced(monkeypatch)
    carriers: list[dict[str, str]] = []
    response = await _post(_app(telemetry, carriers))
    assert response.status_code == 200
    server, attributes = _server(spans)
    assert server.name == f"POST {PATH}" and server.parent is None
    assert attributes == {
        "http.request.method": "POST",
        "url.scheme": "http",
        "url.path": PATH,
        "http.route": PATH,
        "network.protocol.version": "1.1",
        "server.address": "gw.test",
        "server.port": 8080,
        "client.address": "10.1.2.3",
        "user_agent.original": "sdk/1.0",
        "http.response.status_code": 200,
        "turnout.request_id": "rid-7",
    }
    assert not OLD_NAMES & set(attributes) and server.status.status_code is StatusCode.UNSET
    assert len(spans.get_finished_spans()) == 1  # the ingress's share of a queued request
    [carrier] = carriers
    assert carrier["traceparent"].split("-")[2] == format(server.context.span_id, "016x")  # the job's parent


async def test_the_clients_trace_is_continued(monkeypatch: pytest.MonkeyPatch) -> None:
    telemetry, spans = _traced(monkeypatch)
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    await _post(_app(telemetry, []), traceparent=f"00-{trace_id}-{span_id}-01")
    server, _ = _server(spans)
    assert server.parent is not None and server.parent.is_remote
    assert (format(server.context.trace_id, "032x"), format(server.parent.span_id, "016x")) == (trace_id, span_id)


@pytest.mark.parametrize(("kind", "status", "error"), [("503", 503, "503"), ("boom", 500, "Boom")])
async def test_a_5xx_or_an_exception_marks_the_span_an_error(
    monkeypatch: pytest.MonkeyPatch, kind: str, status: int, error: str
) -> None:
    telemetry, spans = _traced(monkeypatch)
    response = await _post(_app(telemetry, []), **{"x-kind": kind})
    assert response.status_code == status
    server, attributes = _server(spans)
    assert attributes["http.response.status_code"] == status and attributes["error.type"] == error
    assert server.status.status_code is StatusCode.ERROR


async def test_a_dropped_request_builds_no_attribute_and_passes_its_unsampled_context_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    telemetry, spans = _traced(monkeypatch, "parentbased_always_off")

    def never(*args: object) -> None:
        raise AssertionError("attributes built for a span the sampler dropped")

    monkeypatch.setattr(observability, "_request_attributes", never)
    monkeypatch.setattr(observability, "_tag_response", never)
    carriers: list[dict[str, str]] = []
    response = await _post(_app(telemetry, carriers))
    assert response.status_code == 200 and response.headers["x-request-id"] == "rid-7"
    assert spans.get_finished_spans() == ()
    [carrier] = carriers
    assert not _sampled(carrier)  # the worker drops the trace too


async def test_a_sampled_client_trace_is_kept_under_a_parent_based_sampler_that_drops_new_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    telemetry, spans = _traced(monkeypatch, "parentbased_always_off")
    carriers: list[dict[str, str]] = []
    parent = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    await _post(_app(telemetry, carriers), **parent)
    assert [s.kind for s in spans.get_finished_spans()] == [SpanKind.SERVER]
    assert _sampled(carriers[0])
