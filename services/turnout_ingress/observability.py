"""The ingress's observability: server spans and the request id on them.

Owns: the FastAPI instrumentation (one SERVER span per request, without the
per-message `send` / `receive` spans, health and metrics routes excluded)
and a pure ASGI middleware that copies the `x-request-id` response header
onto the server span as `turnout.request_id`, so a trace is found by the id
a client saw. The process's telemetry, records and router observers are the
runtime's (`turnout.runtime.Observation`, service `turnout-ingress`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import FastAPI
from opentelemetry import trace
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from turnout.observability.telemetry import REQUEST_ID
from turnout.runtime import ROLES

if TYPE_CHECKING:
    from turnout_ingress.state import IngressState

SERVICE_NAME = ROLES["ingress"].service
EXCLUDED_URLS = "/health/liveness,/health/readiness,/metrics"


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
                for name, value in message.get("headers", ()):
                    if name.lower() == b"x-request-id":
                        span.set_attribute(REQUEST_ID, value.decode("latin-1"))
                        break
            await send(message)

        await self._app(scope, receive, tagging_send)


def install(app: FastAPI, state: IngressState) -> None:
    """Instrument `app`: SERVER spans through `state.obs.telemetry`, the request id on them."""
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
