"""The span exporters of a process whose tracing is on: where spans go, scrubbed.

Owns: `JsonLinesSpanExporter` (`TURNOUT_TRACE_FILE`), `ScrubbingSpanExporter` (every
exporter sees spans through it: URL queries redacted, every other text through the
process's credential scrubber) and the choice of exporter by `OTEL_TRACES_EXPORTER` name.
Imports the OpenTelemetry SDK: `turnout.observability.tracing` imports this module only
when something will export (with tracing off, a process never loads the SDK).
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SpanExporter, SpanExportResult
from opentelemetry.trace import Status
from opentelemetry.util.types import Attributes

from turnout.scrub import REDACTED, redact_shapes

log = logging.getLogger("turnout.tracing")


class HashedResource(Resource):
    """A `Resource` whose hash is computed once: the OTLP encoder groups every exported span by
    its resource, hashing it each time (`Resource.__hash__` serialises the attributes to JSON:
    ~4 µs a span), and a process's resource never changes.

    Args:
        resource: the resource to copy (attributes and schema URL).
    """

    def __init__(self, resource: Resource) -> None:
        super().__init__(resource.attributes, resource.schema_url)
        self._hashed = super().__hash__()

    def __hash__(self) -> int:
        return self._hashed


def otlp_protocol(env: Mapping[str, str], signal: str) -> str:
    """`OTEL_EXPORTER_OTLP_{signal}_PROTOCOL`, else `OTEL_EXPORTER_OTLP_PROTOCOL`, else `http/protobuf`."""
    return env.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"


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
_URL_KEYS = _QUERY_ATTRIBUTES | _URL_ATTRIBUTES
_PLAIN = frozenset({int, float, bool})


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


def _changed(attributes: Attributes, scrub: Callable[[str], str]) -> dict[str, Any] | None:
    """`scrub_attributes(attributes, scrub)`, or None when it would equal `attributes` (nothing to hide:
    the usual case, then no copy is made)."""
    if not attributes:
        return None
    for key, value in attributes.items():
        if type(value) is str:  # the common case first: a text no rule of its key applies to
            if (scrub(value) if key not in _URL_KEYS else _scrub_value(key, value, scrub)) != value:
                return scrub_attributes(attributes, scrub)
        elif type(value) not in _PLAIN and _scrub_value(key, value, scrub) != value:
            return scrub_attributes(attributes, scrub)
    return None


class ScrubbingSpanExporter(SpanExporter):
    """Exports through `inner` the spans with their texts scrubbed (module doc): a span with a
    text to hide is exported as a scrubbed copy, any other as it is (most spans: no copy).

    Args:
        inner: the exporter that sends or writes the spans.
        scrub: the credential scrubber (`Scrubber.credentials`; default: by
            shape only, `turnout.scrub.redact_shapes`).
    """

    def __init__(self, inner: SpanExporter, scrub: Callable[[str], str] | None = None) -> None:
        self.inner = inner
        self._scrub = scrub or redact_shapes

    def _scrubbed(self, span: ReadableSpan, scrub: Callable[[str], str]) -> ReadableSpan:
        """`span`, or its copy with every text scrubbed when one changes."""
        attributes = _changed(span.attributes, scrub)
        events = span.events
        new_events = [_changed(e.attributes, scrub) for e in events]
        status = span.status
        description = status.description and scrub(status.description)
        if attributes is None and description == status.description and not any(e is not None for e in new_events):
            return span
        return ReadableSpan(
            name=span.name,
            context=span.get_span_context(),
            parent=span.parent,
            resource=span.resource,
            attributes=span.attributes if attributes is None else attributes,
            events=[e if a is None else Event(e.name, a, e.timestamp) for e, a in zip(events, new_events, strict=True)],
            links=span.links,
            kind=span.kind,
            status=status if description == status.description else Status(status.status_code, description),
            start_time=span.start_time,
            end_time=span.end_time,
            instrumentation_scope=span.instrumentation_scope,
        )

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Export `spans` scrubbed; see `SpanExporter`. Each distinct text of the batch is scrubbed
        once (a batch repeats its service, provider, model, route and status texts in every span:
        `once`)."""
        scrub = once(self._scrub)
        return self.inner.export([self._scrubbed(s, scrub) for s in spans])

    def shutdown(self) -> None:
        """Shut `inner` down."""
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush `inner`."""
        return self.inner.force_flush(timeout_millis)


def once(scrub: Callable[[str], str]) -> Callable[[str], str]:
    """`scrub` remembering its answers: the same text is scrubbed once (for one export batch,
    over which the known credentials do not change; the memory goes with the batch)."""
    seen: dict[str, str] = {}

    def scrubbed(text: str) -> str:
        answer = seen.get(text)
        if answer is None:
            answer = seen[text] = scrub(text)
        return answer

    return scrubbed


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


def span_exporter(name: str, env: Mapping[str, str]) -> SpanExporter | None:
    """The exporter `OTEL_TRACES_EXPORTER` names (`console`, `otlp`), or None (logged) when it cannot be built."""
    if name == "console":
        return ConsoleSpanExporter()
    if name == "otlp":
        if otlp_protocol(env, "TRACES") == "grpc":
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
