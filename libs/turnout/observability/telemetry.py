"""Span names, attribute keys and the observers that turn the loop into telemetry.

Owns: every span name, span attribute key and metric name Turnout emits
(SPEC §9); the trace context that crosses the queue (W3C `traceparent` in
`JobPayload.trace`); the span helpers for the job (CONSUMER: the queue hop)
and request spans; and the trace `RouteObserver` (one CLIENT span per attempt
with the GenAI semantic-convention attributes and, beneath it, the HTTP client
span of its upstream call; plus the GenAI client metrics).
`turnout.observability.observers` composes it with the others.
Must not import: services, FastAPI, arq.

The spans of a queued request (bench/README.md "Tracing at an operator's price"):
the ingress's SERVER span, the worker's CONSUMER span (which also carries the
request: no span of its own), one CLIENT span per attempt and the HTTP client span
of its upstream call beneath it (SPEC §9: `http.request.method`, `server.address` /
`server.port`, `http.response.status_code`; its context is the `traceparent` the
upstream is sent); a stream, served by the ingress, has a request span between its
SERVER span and its attempts.
Each span costs the SDK ~17 µs to make and ~15 µs to encode, plus ~4 µs per
attribute, so there are no more of either than the trace needs; and below a
span the sampler dropped nothing is built (`in_dropped_trace`).

Never put prompt or completion text, a provider's error message or any key
in a span: attributes here are ids, model names, counts and outcomes only
(`turnout.key` is the gateway key's *name*).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.metrics import Histogram, Meter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from turnout.adapters.families import provider_name
from turnout.core.types import FailureKind, Target
from turnout.router.after_answer import ended_at_ns

if TYPE_CHECKING:
    from turnout.adapters.base import Usage
    from turnout.catalog import CatalogSource
    from turnout.core.loop import AttemptRecord, Dispatch
    from turnout.router import RequestInfo

QUEUE_NAME = "arq:queue"
SPAN_JOB = f"process {QUEUE_NAME}"
"""CONSUMER span of a worker running a job (child of the ingress's SERVER span: the queue hop)."""
SPAN_REQUEST_PREFIX = "route"
"""Request span covering the whole attempt loop: `route {requested model}`."""
SPAN_ATTEMPT_PREFIX = "chat"
SPAN_HTTP = "POST"
"""The HTTP client span beneath an attempt (HTTP semantic conventions: the method; every upstream call is a POST)."""
HTTP_METHOD = "http.request.method"
"""CLIENT span per attempt: `chat {model}` (GenAI: `{operation} {request model}`)."""
EVENT_WAITED = "waited"
"""Event on the request span for each backoff wait."""

# GenAI / general semantic conventions
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_PROVIDER = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_TOKEN_TYPE = "gen_ai.token.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"
HTTP_RESEND_COUNT = "http.request.resend_count"
HTTP_STATUS = "http.response.status_code"
MESSAGING_SYSTEM = "messaging.system"
MESSAGING_OPERATION_TYPE = "messaging.operation.type"
MESSAGING_DESTINATION = "messaging.destination.name"

# Turnout's own
REQUEST_ID = "turnout.request_id"
PROVIDER = "turnout.provider"
"""The catalog's name of the attempt's provider (`gen_ai.provider.name` is its kind's semconv name)."""
ORG = "turnout.org"
SQUAD = "turnout.squad"
KEY = "turnout.key"
REQUESTED_MODEL = "turnout.requested_model"
STREAMING = "turnout.streaming"
JOB_RESULT = "turnout.job.result"
QUEUE_WAIT_S = "turnout.queue.wait_s"
ATTEMPT_NUMBER = "turnout.attempt.number"
ATTEMPT_CLASS = "turnout.attempt.class"
ATTEMPT_KIND = "turnout.attempt.kind"
ATTEMPT_IS_RETRY = "turnout.attempt.is_retry"
ATTEMPT_IS_FALLBACK = "turnout.attempt.is_fallback"
ATTEMPT_IS_REROUTE = "turnout.attempt.is_reroute"
ATTEMPT_DELAY_BEFORE_S = "turnout.attempt.delay_before_s"
WAIT_DELAY_S = "turnout.wait.delay_s"
WAIT_REASON = "turnout.wait.reason"

# GenAI client metrics (OpenTelemetry semantic conventions)
METRIC_OPERATION_DURATION = "gen_ai.client.operation.duration"
METRIC_TOKEN_USAGE = "gen_ai.client.token.usage"
_DURATION_BUCKETS_S = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
_TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]


_MAX_CALLS = 4096
"""Most targets whose call attributes a `SpanObserver` keeps (then it starts again)."""


def _attrs(values: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes without None values (OpenTelemetry refuses None)."""
    return {k: v for k, v in values.items() if v is not None}


def in_dropped_trace() -> bool:
    """True when the current span belongs to a trace the sampler dropped (valid, not recording).

    Nothing is started beneath such a span: with every sampler `OTEL_TRACES_SAMPLER` names,
    a child of a dropped span is dropped too (parent-based ones follow the parent; a ratio
    sampler decides on the trace id, the same for the whole trace), so the child's
    attributes would be built for nothing. With no current span (no trace), False.
    """
    span = trace.get_current_span()
    return not span.is_recording() and span.get_span_context().is_valid


def job_trace(request_id: str) -> AbstractContextManager[dict[str, str]]:
    """The W3C trace context a queued job carries (`JobPayload.trace`): the current span's, the
    ingress's SERVER span (with tracing off the ingress does not call it: the job then carries none).

    No span of its own: putting the job on the queue is one Redis call inside the SERVER span, and
    the hop shows as the worker's CONSUMER span beneath it (`job_span`: the messaging attributes,
    the queue wait). In a trace the sampler dropped, the context says so (flag not sampled) and the
    worker drops the trace too.

    Args:
        request_id: the job id (unused: the shape `JobQueue`'s `around_enqueue` calls).

    Returns:
        A context manager yielding the carrier (`traceparent`, `tracestate`); empty when no trace is active.
    """
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return contextlib.nullcontext(carrier)


NO_SPAN: AbstractContextManager[Span] = contextlib.nullcontext(trace.INVALID_SPAN)
"""What `job_span` and `request_span` return with tracing off: nothing is built (reusable)."""


def job_span(
    tracer: Tracer | None, carrier: Mapping[str, str], request_id: str, queue_wait_s: float | None
) -> AbstractContextManager[Span]:
    """The CONSUMER span of a worker's job, continuing the carrier's trace.

    Args:
        tracer: the worker's tracer; None (tracing off, `Telemetry.tracing`):
            `NO_SPAN`, no span started and the carrier not read.
        carrier: `JobPayload.trace` (empty: a new trace starts).
        request_id: the job id.
        queue_wait_s: seconds between enqueue and start, when known.
    """
    if tracer is None:
        return NO_SPAN
    return _job_span(tracer, carrier, request_id, queue_wait_s)


@contextlib.contextmanager
def _job_span(
    tracer: Tracer, carrier: Mapping[str, str], request_id: str, queue_wait_s: float | None
) -> Iterator[Span]:
    span = tracer.start_span(SPAN_JOB, context=propagate.extract(carrier), kind=SpanKind.CONSUMER)
    if span.is_recording():  # a trace the sampler dropped builds no attribute
        attributes: dict[str, Any] = {
            MESSAGING_SYSTEM: "arq",
            MESSAGING_OPERATION_TYPE: "process",
            MESSAGING_DESTINATION: QUEUE_NAME,
            REQUEST_ID: request_id,  # the message id too (`messaging.message.id`: not repeated)
        }
        if queue_wait_s is not None:
            attributes[QUEUE_WAIT_S] = queue_wait_s
        span.set_attributes(attributes)
    with trace.use_span(span, end_on_exit=True):
        yield span


def request_span(tracer: Tracer | None, info: RequestInfo, *, own: bool = True) -> AbstractContextManager[Span]:
    """The span covering one request's whole attempt loop (attempt spans nest in it).

    It carries no `gen_ai.*` attribute: GenAI backends count every span with
    `gen_ai.operation.name` as one model call, and the calls are the attempt
    spans beneath (SPEC §9). `tracer` None (tracing off, `Telemetry.tracing`),
    or a trace the sampler dropped (`in_dropped_trace`): `NO_SPAN`, nothing built.

    Args:
        tracer: see above.
        info: the request.
        own: False where the current span already covers the loop (a worker's
            job span): the request's attributes go on it and no span is started
            (one span less per request).
    """
    if tracer is None or in_dropped_trace():
        return NO_SPAN
    if not own:
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attributes(_request_attributes(info))
        return contextlib.nullcontext(span)
    return _request_span(tracer, info)


def _request_attributes(info: RequestInfo) -> dict[str, Any]:
    """The request's attributes (`turnout.org`, `.squad`, `.key`, `.requested_model`, `.streaming` when true)."""
    attributes: dict[str, Any] = {REQUESTED_MODEL: info.requested_model}
    if info.streaming:
        attributes[STREAMING] = True
    if info.org:
        attributes[ORG] = info.org
    if info.squad is not None:
        attributes[SQUAD] = info.squad
    if info.key:
        attributes[KEY] = info.key
    return attributes


@contextlib.contextmanager
def _request_span(tracer: Tracer, info: RequestInfo) -> Iterator[Span]:
    attributes = {REQUEST_ID: info.request_id, **_request_attributes(info)}
    name = f"{SPAN_REQUEST_PREFIX} {info.requested_model}"
    with tracer.start_as_current_span(name, kind=SpanKind.INTERNAL, attributes=attributes) as span:
        yield span


class _AttemptHandle:
    __slots__ = ("http", "parent", "span")

    def __init__(self, span: Span, http: Span, parent: otel_context.Context) -> None:
        self.span = span
        self.http = http
        self.parent = parent


def _server(base_url: str) -> tuple[str | None, int | None]:
    parts = urlsplit(base_url)
    default = 443 if parts.scheme == "https" else 80
    port = parts.port if parts.port and parts.port != default else None
    return parts.hostname, port


class SpanObserver:
    """One CLIENT span per attempt and the HTTP client span beneath it, the `waited` events, the
    GenAI client metrics.

    The HTTP span is made the current span while the upstream call runs (the exchange
    sends its `traceparent` upstream); the caller's context comes back
    when the attempt ends (a committed stream's attempt ends when the stream
    does, possibly in another task: the span is ended there, and the context
    is put back only where the attempt span is still the current one).

    Args:
        tracer: where spans go (None: tracing off, no span is started).
        catalog: provider base URLs (for `server.address` / `server.port`),
            read from the catalog in force when each attempt starts.
        meter: where the GenAI client metrics go (None: none).
    """

    def __init__(self, tracer: Tracer | None, catalog: CatalogSource, meter: Meter | None = None) -> None:
        self._tracer = tracer
        self._catalog = catalog
        self._calls: dict[Target, tuple[object, dict[str, Any]]] = {}  # target -> (its provider's config, attributes)
        self._duration: Histogram | None = None
        self._tokens: Histogram | None = None
        if meter is not None:
            self._duration = meter.create_histogram(
                METRIC_OPERATION_DURATION,
                unit="s",
                description="GenAI operation duration.",
                explicit_bucket_boundaries_advisory=_DURATION_BUCKETS_S,
            )
            self._tokens = meter.create_histogram(
                METRIC_TOKEN_USAGE,
                unit="{token}",
                description="Number of input and output tokens used.",
                explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
            )

    def _call_of(self, target: Target) -> dict[str, Any]:
        """The GenAI attributes naming one call to `target` (`gen_ai.operation.name`, `gen_ai.provider.name`,
        `turnout.provider`, `gen_ai.request.model`, `server.address` / `server.port` when known), from the
        catalog in force; built once per target and provider configuration (do not change the dict).

        `gen_ai.provider.name` is `families.provider_name`: the kind's well-known name, `aws.bedrock`,
        `gcp.gemini`, ..., else the provider's name; (host, port) come from the provider's base URL.
        """
        config = self._catalog.current.providers.get(target.provider)
        known = self._calls.get(target)
        if known is not None and known[0] is config:
            return known[1]
        host, port = (None, None) if config is None else _server(config.base_url)
        attributes = _attrs(
            {
                GEN_AI_OPERATION: "chat",
                GEN_AI_PROVIDER: target.provider if config is None else provider_name(config.kind, target.provider),
                PROVIDER: target.provider,
                GEN_AI_REQUEST_MODEL: target.model,
                SERVER_ADDRESS: host,
                SERVER_PORT: port,
            }
        )
        if len(self._calls) >= _MAX_CALLS:
            self._calls.clear()  # targets of catalogs long replaced
        self._calls[target] = (config, attributes)
        return attributes

    def attempt_started(self, info: RequestInfo, dispatch: Dispatch) -> object:
        """Start the attempt's span and make it current (tracing off, or a trace the sampler
        dropped: nothing). See `RouteObserver`."""
        if self._tracer is None or in_dropped_trace():
            return None
        target = dispatch.entry.target
        attributes = {**self._call_of(target), ATTEMPT_NUMBER: dispatch.number}
        if dispatch.is_retry:
            attributes[ATTEMPT_IS_RETRY] = True
        if dispatch.resend_count:
            attributes[HTTP_RESEND_COUNT] = dispatch.resend_count
        if dispatch.delay_before_s > 0:
            attributes[ATTEMPT_DELAY_BEFORE_S] = round(dispatch.delay_before_s, 6)
        parent = otel_context.get_current()
        span = self._tracer.start_span(
            f"{SPAN_ATTEMPT_PREFIX} {target.model}", context=parent, kind=SpanKind.CLIENT, attributes=attributes
        )
        http = self._tracer.start_span(
            SPAN_HTTP,
            context=trace.set_span_in_context(span, parent),
            kind=SpanKind.CLIENT,
            attributes=self._http_of(target),
        )
        otel_context.attach(trace.set_span_in_context(http, parent))
        return _AttemptHandle(span, http, parent)

    def _http_of(self, target: Target) -> dict[str, Any]:
        """The HTTP client span's request attributes: the method and the call's server (`_call_of`)."""
        call = self._call_of(target)
        return {HTTP_METHOD: SPAN_HTTP, **{k: call[k] for k in (SERVER_ADDRESS, SERVER_PORT) if k in call}}

    async def attempt_dispatched(self, handle: object) -> None:
        """Nothing: the span started with the attempt. See `RouteObserver`."""

    def attempt_ended(self, handle: object, info: RequestInfo, record: AttemptRecord, usage: Usage) -> None:
        """Finish the attempt's span and record the GenAI metrics. See `RouteObserver`."""
        ok = record.kind is FailureKind.SUCCESS
        if isinstance(handle, _AttemptHandle):
            self._end_span(handle, record, usage, ok)
        if self._duration is not None and self._tokens is not None:
            self._measure(self._duration, self._tokens, record, usage, ok)

    def _end_span(self, handle: _AttemptHandle, record: AttemptRecord, usage: Usage, ok: bool) -> None:
        span, http = handle.span, handle.http
        if trace.get_current_span() is http:
            otel_context.attach(handle.parent)
        ended = ended_at_ns()  # recorded after the answer: the attempt's own end
        if http.is_recording():
            if record.status is not None:
                http.set_attribute(HTTP_STATUS, record.status)
            if record.status is None or record.status >= 400:
                http.set_attribute(ERROR_TYPE, str(record.status or record.kind))
                http.set_status(Status(StatusCode.ERROR))
        http.end(end_time=ended)
        if span.is_recording():
            attributes: dict[str, Any] = {ATTEMPT_CLASS: str(record.disposition), ATTEMPT_KIND: str(record.kind)}
            if record.is_fallback:
                attributes[ATTEMPT_IS_FALLBACK] = True
            if record.is_reroute:
                attributes[ATTEMPT_IS_REROUTE] = True
            if record.status is not None:
                attributes[HTTP_STATUS] = record.status
            if ok:
                attributes[GEN_AI_RESPONSE_MODEL] = record.target.model
                attributes[GEN_AI_INPUT_TOKENS] = usage.input_tokens
                attributes[GEN_AI_OUTPUT_TOKENS] = usage.output_tokens
            else:
                attributes[ERROR_TYPE] = str(record.kind)
                span.set_status(Status(StatusCode.ERROR, str(record.kind)))
            span.set_attributes(attributes)
        span.end(end_time=ended)

    def _measure(self, duration: Histogram, tokens: Histogram, record: AttemptRecord, usage: Usage, ok: bool) -> None:
        target = record.target
        common = self._call_of(target)
        measured = {**common, GEN_AI_RESPONSE_MODEL: target.model} if ok else {**common, ERROR_TYPE: str(record.kind)}
        duration.record(record.duration_ms / 1000.0, measured)
        if ok:
            tokens.record(usage.input_tokens, {**measured, GEN_AI_TOKEN_TYPE: "input"})
            tokens.record(usage.output_tokens, {**measured, GEN_AI_TOKEN_TYPE: "output"})

    def waited(self, info: RequestInfo, delay_s: float, reason: str) -> None:
        """Add a `waited` event to the current (request) span. See `RouteObserver`."""
        if self._tracer is None:
            return
        span = trace.get_current_span()
        if span.is_recording():
            span.add_event(EVENT_WAITED, {WAIT_DELAY_S: round(delay_s, 6), WAIT_REASON: reason})
