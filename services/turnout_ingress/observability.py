"""The ingress's observability: server spans and the request id on them.

Owns: the SERVER span of each request, with the stable HTTP semantic-convention
attributes and `turnout.request_id` (the `x-request-id` the client saw, so a trace
is found by it), in two places:
- the hot path (`turnout_ingress.hot_path`: the client surfaces' `POST`, nearly every
  request): `ServerSpans`, a few lines around the endpoint's call. The ASGI
  instrumentation's middleware cost ~95 µs of CPU per request without exporting
  (it builds the attributes twice, wraps every message, records the HTTP server
  metrics), `ServerSpans` ~25 µs (bench/README.md "Tracing at an operator's price");
- every other route: the FastAPI instrumentation (health and metrics routes
  excluded, no per-message `send` / `receive` spans), with `RequestIdOnSpan`.
The process's telemetry, records and router observers are the runtime's
(`turnout.runtime.Observation`, service `turnout-ingress`).

A request the sampler drops (`OTEL_TRACES_SAMPLER`) gets a span that records
nothing: no attribute is built, and its trace context (flag not sampled) still
rides in the job, so the worker drops the trace too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from turnout.observability.telemetry import ERROR_TYPE, HTTP_STATUS, REQUEST_ID, SERVER_ADDRESS, SERVER_PORT
from turnout.runtime import ROLES

if TYPE_CHECKING:
    from turnout_ingress.state import IngressState

SERVICE_NAME = ROLES["ingress"].service
EXCLUDED_URLS = "/health/liveness,/health/readiness,/metrics"
REQUEST_ID_HEADER = b"x-request-id"
DEFAULT_PORTS = {"http": 80, "https": 443}

# Stable HTTP semantic conventions (HTTP server span)
HTTP_METHOD = "http.request.method"
HTTP_ROUTE = "http.route"
URL_SCHEME = "url.scheme"
URL_PATH = "url.path"
URL_QUERY = "url.query"
PROTOCOL_VERSION = "network.protocol.version"
CLIENT_ADDRESS = "client.address"
USER_AGENT = "user_agent.original"


class RequestIdOnSpan:
    """Pure ASGI middleware: the response's `x-request-id` becomes `turnout.request_id` on the current span."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        span = trace.get_current_span()
        if not span.is_recording():
            await self._app(scope, receive, send)
            return

        async def tagging_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                _tag_request_id(span, message)
            await send(message)

        await self._app(scope, receive, tagging_send)


def _tag_request_id(span: Span, message: Message) -> None:
    """`turnout.request_id` from the `x-request-id` header of a response start `message`."""
    for name, value in message.get("headers", ()):
        if name.lower() == REQUEST_ID_HEADER:
            span.set_attribute(REQUEST_ID, value.decode("latin-1"))
            break


class ServerSpans:
    """The SERVER span of a hot-path request (module doc), made the current span while it is served.

    Span `{method} {route}` (a hot route is a literal path), kind SERVER, child of the
    client's trace context when its headers carry one (the global propagator's fields:
    `traceparent`, `tracestate`, `baggage` by default). Attributes, when the sampler
    keeps it: `http.request.method`, `url.scheme`, `url.path`, `url.query` (when there
    is one; the exporter redacts it), `http.route`, `network.protocol.version`,
    `server.address` / `server.port` (from `Host`), `client.address`,
    `user_agent.original`, then `http.response.status_code`, `turnout.request_id` and,
    from a 5xx or an exception, `error.type` and status ERROR.

    Args:
        tracer: the ingress's tracer (`Telemetry.tracing`).
    """

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer
        self._fields = frozenset(f.encode() for f in propagate.get_global_textmap().fields)

    def _parent(self, scope: Scope) -> otel_context.Context:
        """The client's trace context from the request headers, else an empty context (a new trace)."""
        carrier = {k.decode(): v.decode("latin-1") for k, v in scope["headers"] if k in self._fields}
        return propagate.extract(carrier) if carrier else otel_context.Context()

    async def serve(self, scope: Scope, send: Send, call: Callable[[Send], Awaitable[None]]) -> None:
        """Run `call` (the request's service, given the `send` to use) inside the request's SERVER span."""
        span = self._tracer.start_span(f"{scope['method']} {scope['path']}", self._parent(scope), SpanKind.SERVER)
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            if not span.is_recording():  # dropped by the sampler: nothing built, the context still propagates
                await call(send)
                return
            span.set_attributes(_request_attributes(scope))

            async def tagging_send(message: Message) -> None:
                if message["type"] == "http.response.start":
                    _tag_response(span, message)
                await send(message)

            try:
                await call(tagging_send)
            except Exception as exc:
                span.set_attribute(ERROR_TYPE, type(exc).__qualname__)
                span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
                raise
        finally:
            otel_context.detach(token)
            span.end()


def _request_attributes(scope: Scope) -> dict[str, Any]:
    """The SERVER span's request attributes (`ServerSpans`) from an ASGI HTTP `scope`."""
    host, user_agent = None, None
    for name, value in scope["headers"]:
        if name == b"host":
            host = value.decode("latin-1")
        elif name == b"user-agent":
            user_agent = value.decode("latin-1")
    path = scope["path"]
    attributes: dict[str, Any] = {
        HTTP_METHOD: scope["method"],
        URL_SCHEME: scope["scheme"],
        URL_PATH: path,
        HTTP_ROUTE: path,
        PROTOCOL_VERSION: scope["http_version"],
    }
    if scope.get("query_string"):
        attributes[URL_QUERY] = scope["query_string"].decode("latin-1")
    if host:
        name, _, port = host.rpartition(":") if not host.endswith("]") else (host, "", "")
        if not name or not port.isdigit():
            name, port = host, ""
        attributes[SERVER_ADDRESS] = name
        attributes[SERVER_PORT] = int(port) if port else DEFAULT_PORTS.get(scope["scheme"], 80)
    if scope.get("client"):
        attributes[CLIENT_ADDRESS] = scope["client"][0]
    if user_agent:
        attributes[USER_AGENT] = user_agent
    return attributes


def _tag_response(span: Span, message: Message) -> None:
    """The response attributes (status, request id; a 5xx: `error.type`, status ERROR) of a response start."""
    status = message["status"]
    span.set_attribute(HTTP_STATUS, status)
    _tag_request_id(span, message)
    if status >= 500:
        span.set_attribute(ERROR_TYPE, str(status))
        span.set_status(Status(StatusCode.ERROR))


def install(app: FastAPI, state: IngressState) -> None:
    """Instrument `app`'s routes other than the hot path (module doc): SERVER spans through
    `state.obs.telemetry`, the request id on them. Nothing with tracing off."""
    telemetry = state.obs.telemetry
    if not telemetry.exporting:
        return  # no SERVER spans to record: skip the per-request instrumentation cost
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor  # only when used

    app.add_middleware(RequestIdOnSpan)
    FastAPIInstrumentor.instrument_app(
        app,
        tracer_provider=telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
        excluded_urls=EXCLUDED_URLS,
        exclude_spans=["receive", "send"],
    )
