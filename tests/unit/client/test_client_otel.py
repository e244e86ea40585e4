"""`turnout_client.span_hook`: the routing event on the caller's current span."""

from __future__ import annotations

import httpx
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from turnout_client import parse_routing, span_hook


def test_span_hook_adds_one_event_per_answer_and_the_latest_attributes() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("caller")
    with tracer.start_as_current_span("my-operation"):
        span_hook(parse_routing(502, httpx.Headers({"x-turnout-attempts": "3"}), requested_model="a"))
        span_hook(
            parse_routing(
                200,
                httpx.Headers({"x-turnout-attempts": "1", "x-turnout-provider": "p"}),
                requested_model="b",
                chain_index=1,
            )
        )
    [span] = exporter.get_finished_spans()
    assert [e.name for e in span.events] == ["turnout.routing", "turnout.routing"]
    assert span.events[0].attributes is not None and span.events[0].attributes["turnout.attempts"] == 3
    assert span.attributes is not None
    assert (span.attributes["turnout.provider"], span.attributes["turnout.chain_index"]) == ("p", 1)


def test_span_hook_without_a_recording_span_does_nothing() -> None:
    span_hook(parse_routing(200, httpx.Headers({})))  # no current span: no error
