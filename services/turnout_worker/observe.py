"""The worker's observability: traces, attempt records, Prometheus on a side port.

Owns: building, once per worker process, the `Telemetry` (service
`turnout-worker`), the records writer, the Prometheus `Metrics` served by
prometheus-client's own HTTP server on `TURNOUT_METRICS_PORT` (default
9464, 0 disables; bound to `TURNOUT_METRICS_HOST`, else `TURNOUT_HOST`,
else 127.0.0.1), the router's observers; and the per-job scope (job span
continuing the ingress's trace, in-flight gauge, queue wait, request id in
logs). The worker's `app` module calls into this one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import httpx
from opentelemetry.trace import Span, Status, StatusCode
from prometheus_client import start_http_server
from redis.asyncio import Redis

from turnout.catalog import CatalogSource
from turnout.config import Config
from turnout.observability.jsonlog import request_context
from turnout.observability.metrics import Metrics
from turnout.observability.records import RecordsObserver, RecordWriter
from turnout.observability.observers import Observers, SpendObserver, route_observers
from turnout.state.spend_store import SpendLedger
from turnout.observability.telemetry import JOB_RESULT, job_span
from turnout.observability.tracing import Telemetry, setup_tracing
from turnout.wire import JobPayload

log = logging.getLogger("turnout.worker")

SERVICE_NAME = "turnout-worker"
METRICS_PORT_ENV = "TURNOUT_METRICS_PORT"
DEFAULT_METRICS_PORT = 9464


class WorkerObservability:
    """What a worker process observes with; build with `build()`, then `start()`.

    Attributes:
        telemetry: tracer and meter providers.
        metrics: the Prometheus registry served on the side port.
        records: the attempt-record writer, or None (`records_max: 0`).
        spend: the spend ledger the served attempts' costs go to.
        observer: the router's observers.
        metrics_port: the bound side port, or None (disabled or not bound).
    """

    def __init__(self, telemetry: Telemetry, metrics: Metrics, records: RecordWriter | None, observer: Observers,
                 spend: SpendLedger | None = None) -> None:
        self.telemetry = telemetry
        self.metrics = metrics
        self.records = records
        self.spend = spend
        self.observer = observer
        self.metrics_port: int | None = None
        self._server: Any = None

    def instrument(self, http: httpx.AsyncClient) -> None:
        """Add httpx client spans (children of the attempt spans) to `http`.

        Only when spans are exported: unsampled client spans would cost CPU on
        every attempt for nothing (measured: ~18 % of a busy worker's time).
        """
        if not self.telemetry.exporting:
            return
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor  # only when used: ~MiBs of imports

        HTTPXClientInstrumentor.instrument_client(
            http, tracer_provider=self.telemetry.tracer_provider, meter_provider=self.telemetry.meter_provider
        )

    def start(self, env: Mapping[str, str] | None = None) -> None:
        """Start the records flusher and the metrics side port (a busy port is logged, not fatal)."""
        env = os.environ if env is None else env
        if self.records is not None:
            self.records.start()
        if self.spend is not None:
            self.spend.start()
        port = int(env.get(METRICS_PORT_ENV, str(DEFAULT_METRICS_PORT)) or 0)
        if port <= 0:
            return
        host = env.get("TURNOUT_METRICS_HOST") or env.get("TURNOUT_HOST") or "127.0.0.1"
        try:
            self._server, _ = start_http_server(port, addr=host, registry=self.metrics.registry)
        except OSError as exc:
            log.warning("metrics port %s:%d not bound (%s); /metrics disabled", host, port, exc.strerror)
            return
        self.metrics_port = port

    async def stop(self) -> None:
        """Flush the records, stop the side port, flush and stop the exporters."""
        if self.records is not None:
            await self.records.stop()
        if self.spend is not None:
            await self.spend.stop()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        self.telemetry.shutdown()

    @contextlib.contextmanager
    def job(self, payload: JobPayload, enqueue_time: Any) -> Iterator[Span]:
        """The scope of one job: its CONSUMER span, the in-flight gauge, the queue wait.

        Args:
            payload: the job.
            enqueue_time: arq's `ctx["enqueue_time"]` (aware datetime), or None.
        """
        wait_s = max(0.0, time.time() - enqueue_time.timestamp()) if enqueue_time is not None else None
        if wait_s is not None:
            self.metrics.queue_wait.observe(wait_s)
        self.metrics.in_flight_jobs.inc()
        try:
            with request_context(payload.request_id), job_span(
                self.telemetry.tracer, payload.trace, payload.request_id, wait_s
            ) as span:
                yield span
        finally:
            self.metrics.in_flight_jobs.dec()


def set_job_result(span: Span, result: str) -> None:
    """Record a job's status word ("served", "error 502", "skipped: ...") on its span."""
    span.set_attribute(JOB_RESULT, result)
    if result != "served" and not result.startswith("skipped"):
        span.set_status(Status(StatusCode.ERROR, result))


def build(config: Config, redis: Redis, catalog: CatalogSource, env: Mapping[str, str] | None = None,
          scrub: Callable[[str], str] | None = None) -> WorkerObservability:
    """The worker's observability for `config` (exporters from `env`, default `os.environ`; spans
    through the process's credential scrubber `scrub`)."""
    telemetry = setup_tracing(SERVICE_NAME, env, scrub=scrub)
    metrics = Metrics()
    records_max = config.raw.gateway.records_max
    writer = RecordWriter(redis, max_len=records_max, on_drop=metrics.records_dropped.inc) if records_max > 0 else None
    spend = SpendLedger(redis)
    observer = route_observers(
        telemetry.tracer, catalog, meter=telemetry.meter, metrics=metrics,
        records=RecordsObserver(writer, catalog) if writer is not None else None,
        spend=SpendObserver(spend, catalog),
    )
    return WorkerObservability(telemetry, metrics, writer, observer, spend)
