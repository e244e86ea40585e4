"""The ingress's observability: server spans, the request id on them, records.

Owns: building the ingress's telemetry (service `turnout-ingress`), records
writer and router observers (the streaming direct path runs the attempt loop
here); the FastAPI instrumentation (one SERVER span per request, without the
per-message `send` / `receive` spans, health and metrics routes excluded);
and a pure ASGI middleware that copies the `x-request-id` response header
onto the server span as `turnout.request_id`, so a trace is found by the id
a client saw.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import httpx
from fastapi import FastAPI
from opentelemetry import trace
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from turnout.catalog import CatalogSource
from turnout.config import Config
from turnout.observability.metrics import Metrics
from turnout.observability.records import RecordsObserver, RecordWriter
from turnout.observability.observers import Observers, SpendObserver, route_observers
from turnout.state.spend_store import SpendLedger
from turnout.observability.telemetry import REQUEST_ID
from turnout.observability.tracing import Telemetry, setup_tracing

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from turnout_ingress.app import IngressState

SERVICE_NAME = "turnout-ingress"
EXCLUDED_URLS = "/health/liveness,/health/readiness,/metrics"


class IngressObservability:
    """Telemetry, records writer and router observers of one ingress process.

    Attributes:
        telemetry: tracer and meter providers.
        records: the attempt-record writer (streaming attempts), or None.
        spend: the spend ledger (streaming attempts' costs; the admin API reads it).
        observer: the observers for the ingress's router.
    """

    def __init__(self, config: Config, redis: "Redis", catalog: CatalogSource, metrics: Metrics,
                 telemetry: Telemetry | None = None, scrub: Callable[[str], str] | None = None) -> None:
        self.telemetry = telemetry or setup_tracing(SERVICE_NAME, scrub=scrub)
        self._owns_telemetry = telemetry is None
        records_max = config.raw.gateway.records_max
        self.records = (
            RecordWriter(redis, max_len=records_max, on_drop=metrics.records_dropped.inc) if records_max > 0 else None
        )
        self.spend = SpendLedger(redis)
        self.observer: Observers = route_observers(
            self.telemetry.tracer, catalog, meter=self.telemetry.meter, metrics=metrics,
            records=RecordsObserver(self.records, catalog) if self.records is not None else None,
            spend=SpendObserver(self.spend, catalog),
        )

    def instrument(self, http: httpx.AsyncClient) -> None:
        """Add httpx client spans (children of the attempt spans) to the streaming path's client.

        Only when spans are exported: unsampled client spans would cost CPU on
        every attempt for nothing (measured: ~18 % of a busy worker's time).
        """
        if not self.telemetry.exporting:
            return
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor  # only when used: ~MiBs of imports

        HTTPXClientInstrumentor.instrument_client(
            http, tracer_provider=self.telemetry.tracer_provider, meter_provider=self.telemetry.meter_provider
        )

    def start(self) -> None:
        """Start the records flusher (call on the serving loop)."""
        if self.records is not None:
            self.records.start()
        self.spend.start()

    async def stop(self) -> None:
        """Flush records; flush and stop the exporters this object built."""
        if self.records is not None:
            await self.records.stop()
        await self.spend.stop()
        if self._owns_telemetry:
            self.telemetry.shutdown()


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


def install(app: FastAPI, state: "IngressState") -> None:
    """Instrument `app`: SERVER spans through `state.obs.telemetry`, the request id on them."""
    telemetry = state.obs.telemetry
    if not telemetry.exporting:
        return  # no SERVER spans to record: skip the per-request instrumentation cost
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor  # only when used

    app.add_middleware(RequestIdOnSpan)
    FastAPIInstrumentor.instrument_app(
        app, tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider,
        excluded_urls=EXCLUDED_URLS, exclude_spans=["receive", "send"],
    )
