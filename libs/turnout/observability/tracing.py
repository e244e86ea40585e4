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
    OTEL_BSP_*, OTEL_EXPORTER_OTLP_ENDPOINT, ...: read by the SDK itself
                           (the batch processor's queue, batch and delay have
                           Turnout's defaults when unset: `BSP_DEFAULTS`).
    TURNOUT_TRACE_FILE     Turnout's own: append every finished span as one
                           JSON line to this file (tests, debugging);
                           `{service}` in the path becomes the service name.

HTTP spans use the stable HTTP semantic conventions (`http.request.method`,
`http.response.status_code`, `server.address`, `url.full`, ...): `setup_tracing`
sets `OTEL_SEMCONV_STABILITY_OPT_IN=http` in the process environment, which
the FastAPI and httpx instrumentations read once, when they first instrument,
unless the operator set it (`http/dup` emits the old names beside the new).
This is the one process-wide effect of this module.

The SDK is imported only when used (tracing on, a metric reader, a read of
`Telemetry.tracer_provider`): a process with tracing off never loads it.

Every exporter sees spans through `ScrubbingSpanExporter`
(`turnout.observability.exporters`): URL query strings
(`url.query`, the query of `url.full` / `http.url` / `http.target`) are
replaced by `[redacted]` and every other string attribute, event attribute
and status description passes the process's credential scrubber
(`turnout.scrub.Scrubber.credentials`), whatever instrumentation set it.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING

from opentelemetry import metrics
from opentelemetry.metrics import Meter
from opentelemetry.trace import Tracer

if TYPE_CHECKING:  # the SDK is imported only when used: tracing on, a metric reader, or a read of the provider
    from opentelemetry.sdk.metrics.export import MetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

log = logging.getLogger("turnout.tracing")

INSTRUMENTATION_NAME = "turnout"
"""Name of the tracer and meter Turnout's own spans and metrics come from."""

TRACE_FILE_ENV = "TURNOUT_TRACE_FILE"
SEMCONV_OPT_IN_ENV = "OTEL_SEMCONV_STABILITY_OPT_IN"
STABLE_HTTP = "http"
"""The opt-in value for the stable HTTP semantic conventions only (no old attribute names)."""


BSP_DEFAULTS: dict[str, tuple[str, int]] = {
    "OTEL_BSP_MAX_QUEUE_SIZE": ("max_queue_size", 8192),
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": ("max_export_batch_size", 2048),
    "OTEL_BSP_SCHEDULE_DELAY": ("schedule_delay_millis", 2000),
}
"""Turnout's batch span processor settings, each used unless the operator sets its variable (the SDK
then reads it): variable -> (`BatchSpanProcessor` argument, value). Chosen for a gateway (docs/observability.md):
a batch of 2,048 spans costs ~8 % less CPU per span to send than the SDK's 512 (fewer HTTP posts); the
queue holds four batches (~6 s of a busy ingress's spans, at most a few tens of MiB while a collector
stalls); a span waits at most 2 s (the SDK: 5 s) before it is sent when traffic is light."""


def batch_settings(env: Mapping[str, str]) -> dict[str, int | None]:
    """The `BatchSpanProcessor` arguments: Turnout's (`BSP_DEFAULTS`) for each variable unset in `env`
    and `os.environ`, None (the SDK reads the operator's) for each set; our queue is raised to the
    operator's batch size and our batch lowered to the operator's queue size (the SDK refuses a batch
    larger than the queue)."""
    given: dict[str, int] = {}
    for name in BSP_DEFAULTS:
        text = env.get(name, os.environ.get(name))
        if text is not None:
            try:
                given[name] = int(text)
            except ValueError:
                given[name] = BSP_DEFAULTS[name][1]  # the SDK logs it and uses its own default
    settings: dict[str, int | None] = {arg: None if n in given else v for n, (arg, v) in BSP_DEFAULTS.items()}
    queue, size = "OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"
    if queue not in given and size in given:
        settings["max_queue_size"] = max(BSP_DEFAULTS[queue][1], given[size])
    if size not in given and queue in given:
        settings["max_export_batch_size"] = min(BSP_DEFAULTS[size][1], given[queue])
    return settings


def opt_in_stable_http(environ: MutableMapping[str, str] = os.environ) -> None:
    """Set `OTEL_SEMCONV_STABILITY_OPT_IN=http` in `environ` (default the process's) unless it
    is set: the instrumentations read it from `os.environ` once, at their first instrumenting."""
    environ.setdefault(SEMCONV_OPT_IN_ENV, STABLE_HTTP)


class Telemetry:
    """The OpenTelemetry objects of one process.

    Attributes:
        tracer_provider: the SDK tracer provider (pass it to instrumentations);
            with tracing off it is built at its first read, and the SDK is not
            even imported before (~3 MiB a process at rest).
        meter_provider: the SDK meter provider, or the API's no-op one.
        tracer: Turnout's tracer (built with `tracer_provider`).
        meter: Turnout's meter.
        exporting: True when spans are recorded and exported somewhere.
        tracing: `tracer` when `exporting`, else None: the request path then
            starts no span and injects no trace header (an unsampled span
            costs nearly what a recorded one does, for nothing).
        metering: `meter` when a metric reader is configured, else None (the
            GenAI client metrics are then not computed at all).

    Args:
        tracer_provider: the provider, or what builds it at its first read.
        meter_provider: see above.
        exporting: see above.
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | Callable[[], TracerProvider],
        meter_provider: metrics.MeterProvider,
        exporting: bool,
    ) -> None:
        self._tracer_provider: TracerProvider | None = None
        self._build_provider = tracer_provider if callable(tracer_provider) else None
        if not callable(tracer_provider):
            self._tracer_provider = tracer_provider
        self._tracer: Tracer | None = None
        self.meter_provider = meter_provider
        self.meter = meter_provider.get_meter(INSTRUMENTATION_NAME)
        self.exporting = exporting
        self.tracing: Tracer | None = self.tracer if exporting else None
        self.metering: Meter | None = None if isinstance(meter_provider, metrics.NoOpMeterProvider) else self.meter

    @property
    def tracer_provider(self) -> TracerProvider:
        """See the class doc."""
        if self._tracer_provider is None:
            assert self._build_provider is not None
            self._tracer_provider = self._build_provider()
        return self._tracer_provider

    @property
    def tracer(self) -> Tracer:
        """See the class doc."""
        if self._tracer is None:
            self._tracer = self.tracer_provider.get_tracer(INSTRUMENTATION_NAME)
        return self._tracer

    def shutdown(self) -> None:
        """Flush and stop every exporter (blocks up to the SDK's timeouts)."""
        if self._tracer_provider is not None:
            self._tracer_provider.shutdown()
        shutdown = getattr(self.meter_provider, "shutdown", None)  # the SDK's; the API's no-op has none
        if shutdown is not None:
            shutdown()


def _names(value: str | None) -> list[str]:
    return [n.strip().lower() for n in (value or "").split(",") if n.strip() and n.strip().lower() != "none"]


def _metric_reader(name: str, env: Mapping[str, str]) -> MetricReader | None:
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader

    from turnout.observability.exporters import otlp_protocol

    if name == "console":
        return PeriodicExportingMetricReader(ConsoleMetricExporter())
    if name == "otlp":
        if otlp_protocol(env, "METRICS") == "grpc":
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
        A `Telemetry`; call `shutdown()` when the process stops. Sets
        `OTEL_SEMCONV_STABILITY_OPT_IN=http` in `os.environ` unless set (module doc).
    """
    opt_in_stable_http()  # before any instrumentation reads it (module doc)
    env = os.environ if env is None else env
    service = env.get("OTEL_SERVICE_NAME") or service_name
    names = _names(env.get("OTEL_TRACES_EXPORTER"))
    provider: TracerProvider | Callable[[], TracerProvider] = functools.partial(_unsampled, service)
    exporting = False
    if names or env.get(TRACE_FILE_ENV) or span_exporters:
        provider, exporting = _exporting_provider(service, env, names, span_exporters, scrub)
    readers = [r for r in (_metric_reader(n, env) for n in _names(env.get("OTEL_METRICS_EXPORTER"))) if r is not None]
    readers.extend(metric_readers)
    meter_provider: metrics.MeterProvider = metrics.NoOpMeterProvider()
    if readers:
        from opentelemetry.sdk.metrics import MeterProvider

        meter_provider = MeterProvider(resource=_resource(service), metric_readers=readers)
    return Telemetry(provider, meter_provider, exporting)


def _resource(service: str) -> Resource:
    from opentelemetry.sdk.resources import Resource

    return Resource.create({"service.name": service})


def _unsampled(service: str) -> TracerProvider:
    """A provider whose spans are never recorded (`ALWAYS_OFF`): trace ids without a trace."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    return TracerProvider(resource=_resource(service), sampler=ALWAYS_OFF)


def _exporting_provider(
    service: str,
    env: Mapping[str, str],
    names: list[str],
    span_exporters: Sequence[SpanExporter],
    scrub: Callable[[str], str] | None,
) -> tuple[TracerProvider, bool]:
    """The provider with its exporters (every one behind `ScrubbingSpanExporter`), and whether
    any exports (an unknown or unavailable exporter is logged and left out)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    from turnout.observability.exporters import (
        HashedResource,
        JsonLinesSpanExporter,
        ScrubbingSpanExporter,
        span_exporter,
    )

    batch = [e for e in (span_exporter(n, env) for n in names) if e is not None]
    if env.get(TRACE_FILE_ENV):
        batch.append(JsonLinesSpanExporter(env[TRACE_FILE_ENV].replace("{service}", service)))
    if not (batch or span_exporters):
        return _unsampled(service), False
    provider = TracerProvider(resource=HashedResource(_resource(service)))
    settings = batch_settings(env)
    for exporter in batch:
        processor = BatchSpanProcessor(
            ScrubbingSpanExporter(exporter, scrub),
            max_queue_size=settings["max_queue_size"],
            schedule_delay_millis=settings["schedule_delay_millis"],
            max_export_batch_size=settings["max_export_batch_size"],
        )
        provider.add_span_processor(processor)
    for exporter in span_exporters:
        provider.add_span_processor(SimpleSpanProcessor(ScrubbingSpanExporter(exporter, scrub)))
    return provider, True
