"""The worker's observability: Prometheus on a side port and the per-job scope.

Owns: the Prometheus `Metrics` (the runtime's, `turnout.runtime.Observation`)
served by prometheus-client's HTTP server on `TURNOUT_METRICS_PORT` (with
`TURNOUT_METRICS_TOKEN`, only to scrapes carrying it: `turnout.observability.metrics_auth`)
(default 9464, 0 disables; bound to `TURNOUT_METRICS_HOST`, else
`TURNOUT_HOST`, else 127.0.0.1: `turnout.settings`), and the per-job scope
(job span continuing the ingress's trace, in-flight gauge, queue wait,
request id in logs). The telemetry (service `turnout-worker`), attempt
records and router observers are the runtime's. The worker's `app` module
calls into this one.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

from opentelemetry.trace import Span, Status, StatusCode

from turnout.observability.jsonlog import request_context
from turnout.observability.metrics_auth import serve_metrics
from turnout.observability.telemetry import JOB_RESULT, job_span
from turnout.runtime import ROLES, Observation
from turnout.settings import Settings
from turnout.wire import JobPayload

log = logging.getLogger("turnout.worker")

SERVICE_NAME = ROLES["worker"].service


class WorkerObservability:
    """What a worker process observes with besides the runtime's `Observation`: the
    Prometheus side port and the per-job scope. Build with `WorkerObservability(obs, settings)`,
    then `start()`.

    Attributes:
        telemetry: tracer and meter providers (the runtime's).
        metrics: the Prometheus registry served on the side port (the runtime's).
        metrics_port: the bound side port, or None (disabled or not bound).
    """

    def __init__(self, obs: Observation, settings: Settings) -> None:
        self.telemetry = obs.telemetry
        self.metrics = obs.metrics
        self._port = settings.metrics_port
        self._host = settings.metrics_host
        self._token = settings.metrics_token
        self.metrics_port: int | None = None
        self._server: Any = None

    def start(self) -> None:
        """Start the metrics side port (`TURNOUT_METRICS_PORT`; a busy port is logged, not fatal)."""
        if self._port <= 0:
            return
        try:
            self._server = serve_metrics(self._host, self._port, self.metrics.registry, self._token)
        except OSError as exc:
            log.warning("metrics port %s:%d not bound (%s); /metrics disabled", self._host, self._port, exc.strerror)
            return
        self.metrics_port = self._port

    def stop(self) -> None:
        """Stop the side port."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

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
            with (
                request_context(payload.request_id),
                job_span(self.telemetry.tracing, payload.trace, payload.request_id, wait_s) as span,
            ):
                yield span
        finally:
            self.metrics.in_flight_jobs.dec()


def set_job_result(span: Span, result: str) -> None:
    """Record a job's status word ("served", "error 502", "skipped: ...") on its span."""
    if not span.is_recording():
        return
    span.set_attribute(JOB_RESULT, result)
    if result != "served" and not result.startswith("skipped"):
        span.set_status(Status(StatusCode.ERROR, result))
