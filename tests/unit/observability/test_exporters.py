"""`ScrubbingSpanExporter`: every text of an exported span scrubbed, each distinct text of a batch once."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from turnout.observability.exporters import HashedResource, ScrubbingSpanExporter, once
from turnout.observability.tracing import setup_tracing


def test_once_scrubs_each_distinct_text_one_time() -> None:
    calls: list[str] = []

    def scrub(text: str) -> str:
        calls.append(text)
        return text.replace("secret", "[redacted]")

    scrubbed = once(scrub)
    assert [scrubbed(t) for t in ("a secret", "b", "a secret", "b", "c")] == [
        "a [redacted]",
        "b",
        "a [redacted]",
        "b",
        "c",
    ]
    assert calls == ["a secret", "b", "c"]


def test_a_batch_of_spans_repeating_texts_asks_the_scrubber_once_per_text_and_keeps_every_span_scrubbed() -> None:
    calls: list[str] = []

    def scrub(text: str) -> str:
        calls.append(text)
        return text.replace("sk-live", "[redacted]")

    spans = InMemorySpanExporter()
    exporter = ScrubbingSpanExporter(spans, scrub)
    provider = TracerProvider()
    finished = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(finished))
    tracer = provider.get_tracer("test")
    for n in range(5):
        with tracer.start_as_current_span("attempt", attributes={"provider": "openai", "note": f"sk-live {n % 2}"}):
            pass
    exporter.export(finished.get_finished_spans())
    exported = spans.get_finished_spans()
    assert [(s.attributes or {}).get("note") for s in exported] == [f"[redacted] {n % 2}" for n in range(5)]
    assert sorted(calls) == ["openai", "sk-live 0", "sk-live 1"]


def test_a_hashed_resource_equals_and_hashes_as_its_resource() -> None:
    resource = Resource.create({"service.name": "turnout-worker"})
    hashed = HashedResource(resource)
    assert hashed == resource and hash(hashed) == hash(resource)
    assert dict(hashed.attributes) == dict(resource.attributes) and hashed.schema_url == resource.schema_url
    assert {resource: 1}[hashed] == 1  # the encoder's grouping finds it


def test_spans_are_exported_with_the_hashed_resource(tmp_path: Path) -> None:
    telemetry = setup_tracing("turnout-worker", env={"TURNOUT_TRACE_FILE": str(tmp_path / "spans.jsonl")})
    assert isinstance(telemetry.tracer_provider.resource, HashedResource)
    telemetry.shutdown()
