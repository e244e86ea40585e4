"""OpenTelemetry setup of one process, from the standard `OTEL_*` environment.

Owns: building one `Telemetry` per process (tracer and meter providers, the
tracer and meter Turnout uses), the choice of exporters, and their flush at
shutdown. Nothing here is global: the providers are passed down, never
installed with `set_tracer_provider`, so tests build as many as they like.
Must not import: services, FastAPI, arq.

Exporters (SPEC §12: the standard variables):
    OTEL_TRACES_EXPORTER   unset / `none`: tracing is off: the request path
                           builds no span and no trace header at all
                           (`Telemetry.tracing` is None; the provider is
                           `ALWAYS_OFF` for anything else that asks it);
                           `console`, `otlp` (comma-separated for several).
    OTEL_METRICS_EXPORTER  unset / `none`: a no-op meter; `console`, `otlp`.
    OTEL_EXPORTER_OTLP_PROTOCOL  `http/protobuf` (default) or `grpc` (needs
                           `opentelemetry-exporter-otlp-proto-grpc`).
    OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER,
    OTEL_BSP_*, OTEL_EXPORTER_OTLP_ENDPOINT, ...: read by the SDK itself.
    TURNOUT_TRACE_FILE     Turnout's own: append every finished span as one
                           JSON line to this file (tests, debugging);
                           `{service}` in the path becomes the service name.

Every exporter sees spans through `ScrubbingSpanExporter`: URL query strings
(`url.query`, the query of `url.full` / `http.url` / `http.target`) are
replaced by `[redacted]` and every other string attribute, event attribute
and status description passes the process's credential scrubber
(`turnout.scrub.Scrubber.credentials`), whatever instrumentation set it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from opentelemetry import metrics
from opentelemetry.metrics import Meter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import Status, Tracer
from opentelemetry.util.types import Attributes

from turnout.scrub import REDACTED, redact_shapes

if TYPE_CHECKING:  # the metrics SDK is imported only when a reader is configured (~4 MiB per process)
    from opentelemetry.sdk.metrics.export import MetricReader

log = logging.getLogger("turnout.tracing")

INSTRUMENTATION_NAME = "turnout"
"""Name of the tracer and meter Turnout's own spans and metrics come from."""

TRACE_FILE_ENV = "TURNOUT_TRACE_FILE"


class JsonLinesSpanExporter(SpanExporter):
    """Writes each finished span as one JSON object per line (append mode).

    Fields: `name`, `trace_id` / `span_id` / `parent_span_id` (hex),
    `kind`, `start_ns` / `end_ns` (epoch nanoseconds), `attributes`,
    `events` (name, attributes), `status`, `service`.
    """

    def __init__(self, path: str) -> None:
        self._lock = threading.Lock()
        self._file: IO[str] = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in shutdown()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Append `spans`; see `SpanExporter`."""
        lines = [json.dumps(span_as_dict(s), default=str) + "\n" for s in spans]
        with self._lock:
            if self._file.closed:
                return SpanExportResult.FAILURE
            self._file.writelines(lines)
            self._file.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Close the file."""
        with self._lock:
            self._file.close()


_QUERY_ATTRIBUTES = frozenset({"url.query", "http.query"})
_URL_ATTRIBUTES = frozenset({"url.full", "http.url", "http.target"})


def _scrub_value(key: str, value: Any, scrub: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        if key in _QUERY_ATTRIBUTES:
            return REDACTED
        if key in _URL_ATTRIBUTES and "?" in value:
            value = value.split("?", 1)[0] + "?" + REDACTED
        return scrub(value)
    if isinstance(value, (tuple, list)) and any(isinstance(v, str) for v in value):
        return tuple(scrub(v) if isinstance(v, str) else v for v in value)
    return value


def scrub_attributes(attributes: Attributes, scrub: Callable[[str], str]) -> dict[str, Any]:
    """`attributes` with URL queries redacted and every string passed through `scrub`."""
    return {k: _scrub_value(k, v, scrub) for k, v in (attributes or {}).items()}


class ScrubbingSpanExporter(SpanExporter):
    """Exports through `inner` copies of the spans with their texts scrubbed (module doc).

    Args:
        inner: the exporter that sends or writes the spans.
        scrub: the credential scrubber (`Scrubber.credentials`; default: by
            shape only, `turnout.scrub.redact_shapes`).
    """

    def __init__(self, inner: SpanExporter, scrub: Callable[[str], str] | None = None) -> None:
        self.inner = inner
        self._scrub = scrub or redact_shapes

    def _copy(self, span: ReadableSpan) -> ReadableSpan:
        scrub = self._scrub
        status = span.status
        if status.description:
            status = Status(status.status_code, scrub(status.description))
        return ReadableSpan(
            name=span.name,
            context=span.get_span_context(),
            parent=span.parent,
            resource=span.resource,
            attributes=scrub_attributes(span.attributes, scrub),
            events=[Event(e.name, scrub_attributes(e.attributes, scrub), e.timestamp) for e in span.events],
            links=span.links,
            kind=span.kind,
            status=status,
            start_time=span.start_time,
            end_time=span.end_time,
            instrumentation_scope=span.instrumentation_scope,
        )

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Export scrubbed copies of `spans`; see `SpanExporter`."""
        return self.inner.export([self._copy(s) for s in spans])

    def shutdown(self) -> None:
        """Shut `inner` down."""
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush `inner`."""
        return self.inner.force_flush(timeout_millis)


def span_as_dict(span: ReadableSpan) -> dict[str, Any]:
    """A finished span as plain JSON-able data (see `JsonLinesSpanExporter`)."""
    ctx = span.get_span_context()
    return {
        "name": span.name,
        "trace_id": format(ctx.trace_id, "032x") if ctx else None,
        "span_id": format(ctx.span_id, "016x") if ctx else None,
        "parent_span_id": format(span.parent.span_id, "016x") if span.parent else None,
        "kind": span.kind.name,
        "start_ns": span.start_time,
        "end_ns": span.end_time,
        "attributes": dict(span.attributes or {}),
        "events": [{"name": e.name, "attributes": dict(e.attributes or {})} for e in span.events],
        "status": span.status.status_code.name,
        "service": span.resource.attributes.get("service.name"),
    }


class Telemetry:
    """The OpenTelemetry objects of one process.

    Attributes:
        tracer_provider: the SDK tracer provider (pass it to instrumentations).
        meter_provider: the SDK meter provider, or the API's no-op one.
        tracer: Turnout's tracer.
        meter: Turnout's meter.
        exporting: True when spans are recorded and exported somewhere.
        tracing: `tracer` when `exporting`, else None: the request path then
            starts no span and injects no trace header (an unsampled span
            costs nearly what a recorded one does, for nothing).
        metering: `meter` when a metric reader is configured, else None (the
            GenAI client metrics are then not computed at all).
    """

    def __init__(self, tracer_provider: TracerProvider, meter_provider: metrics.MeterProvider, exporting: bool) -> None:
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.tracer = tracer_provider.get_tracer(INSTRUMENTATION_NAME)
        self.meter = meter_provider.get_meter(INSTRUMENTATION_NAME)
        self.exporting = exporting
        self.tracing: Tracer | None = self.tracer if exporting else None
        self.metering: Meter | None = None if isinstance(meter_provider, metrics.NoOpMeterProvider) else self.meter

    def shutdown(self) -> None:
        """Flush and stop every exporter (blocks up to the SDK's timeouts)."""
        self.tracer_provider.shutdown()
        shutdown = getattr(self.meter_provider, "shutdown", None)  # the SDK's; the API's no-op has none
        if shutdown is not None:
            shutdown()


def _names(value: str | None) -> list[str]:
    return [n.strip().lower() for n in (value or "").split(",") if n.strip() and n.strip().lower() != "none"]


def _otlp_protocol(env: Mapping[str, str], signal: str) -> str:
    return env.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"


def _span_exporter(name: str, env: Mapping[str, str]) -> SpanExporter | None:
    if name == "console":
        return ConsoleSpanExporter()
    if name == "otlp":
        if _otlp_protocol(env, "TRACES") == "grpc":
            try:
                from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found]
                    OTLPSpanExporter as Grpc,
                )
            except ImportError:
                log.error("OTLP over gRPC needs opentelemetry-exporter-otlp-proto-grpc; spans are not exported")
                return None
            return Grpc()  # type: ignore[no-any-return]
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    log.warning("unknown OTEL_TRACES_EXPORTER %r ignored", name)
    return None


def _metric_reader(name: str, env: Mapping[str, str]) -> MetricReader | None:
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader

    if name == "console":
        return PeriodicExportingMetricReader(ConsoleMetricExporter())
    if name == "otlp":
        if _otlp_protocol(env, "METRICS") == "grpc":
            try:
                from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (  # type: ignore[import-not-found]
                    OTLPMetricExporter as Grpc,
                )
            except ImportError:
                log.error("OTLP over gRPC needs opentelemetry-exporter-otlp-proto-grpc; metrics are not exported")
                return None
            return PeriodicExportingMetricReader(Grpc())
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        return PeriodicExportingMetricReader(OTLPMetricExporter())
    log.warning("unknown OTEL_METRICS_EXPORTER %r ignored", name)
    return None


def setup_tracing(
    service_name: str,
    env: Mapping[str, str] | None = None,
    *,
    span_exporters: Sequence[SpanExporter] = (),
    metric_readers: Sequence[MetricReader] = (),
    scrub: Callable[[str], str] | None = None,
) -> Telemetry:
    """Build the process's tracer and meter providers.

    Args:
        service_name: `service.name` unless `OTEL_SERVICE_NAME` is set
            (`turnout-ingress`, `turnout-worker`).
        env: the environment to read (default `os.environ`).
        span_exporters: extra exporters, each behind a synchronous
            `SimpleSpanProcessor` (tests pass an in-memory exporter).
        metric_readers: extra metric readers (tests pass an in-memory one).
        scrub: the process's credential scrubber (`Scrubber.credentials`);
            every exporter, the extra ones included, sees spans through it
            (default: redaction by shape only).

    Returns:
        A `Telemetry`; call `shutdown()` when the process stops.
    """
    env = os.environ if env is None else env
    service = env.get("OTEL_SERVICE_NAME") or service_name
    resource = Resource.create({"service.name": service})
    batch = [e for e in (_span_exporter(n, env) for n in _names(env.get("OTEL_TRACES_EXPORTER"))) if e is not None]
    if env.get(TRACE_FILE_ENV):
        batch.append(JsonLinesSpanExporter(env[TRACE_FILE_ENV].replace("{service}", service)))
    exporting = bool(batch or span_exporters)
    # Nothing would export: Turnout's own code starts no span (`Telemetry.tracing`); anything
    # else handed the provider gets unsampled spans, never recorded.
    provider = TracerProvider(resource=resource, sampler=None if exporting else ALWAYS_OFF)
    for exporter in batch:
        provider.add_span_processor(BatchSpanProcessor(ScrubbingSpanExporter(exporter, scrub)))
    for exporter in span_exporters:
        provider.add_span_processor(SimpleSpanProcessor(ScrubbingSpanExporter(exporter, scrub)))
    readers = [r for r in (_metric_reader(n, env) for n in _names(env.get("OTEL_METRICS_EXPORTER"))) if r is not None]
    readers.extend(metric_readers)
    meter_provider: metrics.MeterProvider = metrics.NoOpMeterProvider()
    if readers:
        from opentelemetry.sdk.metrics import MeterProvider

        meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    return Telemetry(provider, meter_provider, exporting)
