"""The ingress's hot path answers the chat routes exactly as FastAPI's whole stack does: same
status, body and headers for every outcome (the error handlers' bodies included), the same
`turnout_requests_total` counts, an unexpected error raised to the server after its 500."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
from fastapi import Depends, Request
from prometheus_client import CollectorRegistry, Counter
from redis.asyncio import Redis
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response, StreamingResponse

from turnout.errors import GatewayUnavailable, RequestRejected
from turnout.observability.metrics import Metrics
from turnout.state.audit_log import AuditLog, RefusalSampler
from turnout_ingress import errors
from turnout_ingress.admin.audit import AuditMiddleware, AuditRecorder
from turnout_ingress.hot_path import HOT_PATHS, IngressApp
from turnout_ingress.ops_routes import RequestCounter, RouteCounts


class Boom(Exception):
    """An error no handler names (the gateway's own bug)."""


def _outcome(kind: str) -> Response:
    if kind == "ok":
        return Response(b'{"ok": true}', media_type="application/json", headers={"x-turnout-attempts": "1"})
    if kind == "stream":
        return StreamingResponse(iter([b"data: 1\n\n", b"data: [DONE]\n\n"]), media_type="text/event-stream")
    raise {
        "rejected": RequestRejected(401, "Unknown key.", code="invalid_api_key"),
        "unavailable": GatewayUnavailable("All out of rotation.", retry_after_s=7, code="circuit_open"),
        "gone": ClientDisconnect(),
        "deep": RecursionError(),
        "http": HTTPException(409, "conflict"),
        "boom": Boom("bug"),
    }[kind]


def _app(metrics: Metrics, *, hot: bool) -> IngressApp:
    """An app laid out as the ingress's: the error handlers, the counter and audit middleware,
    the two hot routes first among others; `hot`: the hot path on."""
    app = IngressApp(docs_url=None, redoc_url=None, redirect_slashes=False)
    errors.install(app)
    app.add_middleware(RequestCounter, metrics=metrics)
    audit = AuditLog(Redis.from_url("redis://127.0.0.1:9"))
    recorder = AuditRecorder(audit, Counter("hot_path_refused", "", registry=CollectorRegistry()), RefusalSampler())
    app.add_middleware(AuditMiddleware, recorder=recorder)  # admin writes only

    async def endpoint(request: Request) -> Response:
        request.state.request_id = "rid-1"
        await request.body()
        return _outcome(request.headers["x-kind"])

    for path in sorted(HOT_PATHS):
        app.add_api_route(path, endpoint, methods=["POST"])
    app.add_api_route("/v1/models", endpoint, methods=["GET"])
    if hot:
        app.serve_hot(RouteCounts(metrics))
    return app


async def _ask(app: IngressApp, method: str, path: str, kind: str) -> tuple[int, bytes, list[tuple[str, str]]]:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        response = await client.request(method, path, headers={"x-kind": kind}, content=b'{"model": "m"}')
    headers = sorted(response.headers.multi_items())
    rid = response.headers.get("x-request-id", "")
    if not re.fullmatch(r"[0-9a-f]{32}", rid):  # absent, or the test routes' own fixed id
        return response.status_code, response.content, headers
    # minted per answer (an unknown route's): the same shape from both paths, never the same value
    headers = [(k, "<request id>" if k == "x-request-id" else v) for k, v in headers]
    return response.status_code, response.content.replace(rid.encode(), b"<request id>"), headers


def _counts(metrics: Metrics) -> dict[tuple[str, str], float]:
    return {
        (s.labels["route"], s.labels["status"]): s.value
        for family in metrics.registry.collect()
        for s in family.samples
        if s.name == "turnout_requests_total"
    }


KINDS = ["ok", "stream", "rejected", "unavailable", "gone", "deep", "http", "boom"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("path", sorted(HOT_PATHS))
async def test_the_hot_path_answers_and_counts_as_the_whole_stack(kind: str, path: str) -> None:
    whole, fast = Metrics(), Metrics()
    expected = await _ask(_app(whole, hot=False), "POST", path, kind)
    assert await _ask(_app(fast, hot=True), "POST", path, kind) == expected
    assert _counts(fast) == _counts(whole)
    assert expected[0] != 500 or _counts(whole) == {}  # the 500 of a bug is sent outside the counter


async def test_an_unexpected_error_reaches_the_server_after_its_500() -> None:
    transport = httpx.ASGITransport(app=_app(Metrics(), hot=True))  # raises what the app raises
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        with pytest.raises(Boom):
            await client.post("/v1/chat/completions", headers={"x-kind": "boom"})


@pytest.mark.parametrize(("method", "path"), [("GET", "/v1/chat/completions"), ("POST", "/v1/chat/completions/")])
async def test_other_methods_and_paths_still_go_through_fastapi(method: str, path: str) -> None:
    whole, fast = Metrics(), Metrics()
    expected = await _ask(_app(whole, hot=False), method, path, "ok")
    assert expected[0] in (404, 405)
    assert await _ask(_app(fast, hot=True), method, path, "ok") == expected
    assert _counts(fast) == _counts(whole)


def test_a_hot_route_with_a_dependency_is_refused() -> None:
    app = IngressApp()

    async def endpoint(request: Request, who: Any = Depends(lambda: "x")) -> Response:
        return Response()

    app.add_api_route("/v1/messages", endpoint, methods=["POST"])
    with pytest.raises(TypeError, match="must take only the request"):
        app.serve_hot(RouteCounts(Metrics()))


@pytest.mark.parametrize(
    ("path", "shape"),
    [("/v1/chat/completions", "openai"), ("/v1/messages", "anthropic")],
)
async def test_the_500_of_a_bug_is_in_the_routes_error_shape_and_closes_the_connection(path: str, shape: str) -> None:
    status, body, headers = await _ask(_app(Metrics(), hot=True), "POST", path, "boom")
    error = json.loads(body)
    assert status == 500 and ("connection", "close") in headers
    if shape == "anthropic":
        assert error["type"] == "error" and error["error"]["type"] == "api_error"
    else:
        assert error["error"]["code"] == "internal_error" and error["error"]["type"] == "server_error"
