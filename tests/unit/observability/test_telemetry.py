"""Traces and metrics of the attempt loop: the Router driven against mock upstreams.

Spans go to the SDK's in-memory exporter; the GenAI client metrics to an
in-memory reader. Upstreams are `httpx.MockTransport` or the simulator served
in-process through the production client (aiohttp transport).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry import propagate, trace
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from redis.asyncio import Redis

from support.clocks import FakeClock
from turnout.adapters.base import Usage
from turnout.adapters.transport import direct_transport, make_http_client
from turnout.catalog import Catalog
from turnout.config import parse_config
from turnout.core.loop import Dispatch
from turnout.core.plan import RoutingSettings
from turnout.core.policy import Policy
from turnout.observability import telemetry as telemetry_module
from turnout.observability.metrics import Metrics
from turnout.observability.observers import Observers, PrometheusObserver, SpendObserver, route_observers
from turnout.observability.telemetry import EVENT_WAITED, SpanObserver, job_span, job_trace, request_span
from turnout.observability.tracing import Telemetry, setup_tracing
from turnout.router import RequestInfo, Router
from turnout.scrub import Scrubber
from turnout.state.spend_store import SpendLedger
from turnout_sim.app import start_in_background


def attributes(item: ReadableSpan | HistogramDataPoint) -> dict[str, Any]:
    """A span's or a data point's attributes as a plain dict (none: empty)."""
    return dict(item.attributes or {})


KEY_A, KEY_B = "secret-provider-key-aaaa", "secret-provider-key-bbbb"
PROMPT = "TOPSECRET-PROMPT-TEXT"
COMPLETION = "PRIVATE-COMPLETION-TEXT"

CONFIG = """\
providers:
  pa: {{kind: openai_compatible, base_url: "{a}/v1", api_key: %s}}
  pb: {{kind: openai_compatible, base_url: "{b}/v1", api_key: %s}}
models:
  chain:
    order: priority
    offers:
      - {{provider: pa, model: "{ma}", input_usd_per_mtok: 1, output_usd_per_mtok: 2}}
      - {{provider: pb, model: "{mb}", input_usd_per_mtok: 3, output_usd_per_mtok: 4}}
""" % (KEY_A, KEY_B)  # noqa: UP031 - the text keeps its {} fields for .format


def _completion(model: str) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": COMPLETION}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12},
    }


def _mock_upstream(request: httpx.Request) -> httpx.Response:
    if request.url.host == "pa.test":
        return httpx.Response(503, json={"error": {"message": "overloaded", "type": "server_error", "code": None}})
    return httpx.Response(200, json=_completion("m-b"))


class Harness:
    """A router over `catalog` whose telemetry lands in memory."""

    def __init__(self, catalog: Catalog, http: httpx.AsyncClient, policy: Policy) -> None:
        self.spans = InMemorySpanExporter()
        self.reader = InMemoryMetricReader()
        self.telemetry: Telemetry = setup_tracing(
            "turnout-test", env={}, span_exporters=[self.spans], metric_readers=[self.reader]
        )
        self.metrics = Metrics()
        self.catalog = catalog
        self.http = http
        self.policy = policy
        observer = Observers(
            SpanObserver(self.telemetry.tracer, catalog, self.telemetry.meter), PrometheusObserver(self.metrics)
        )

        self.clock = FakeClock()
        self.waits = self.clock.waits
        self.router = self.router_with(observer)

    def router_with(self, observer: Any) -> Router:
        """A router, its breakers and their store on one fake clock, with seeded draws: no real time."""
        return Router(
            catalog=self.catalog,
            http=self.http,
            observer=observer,
            sleep=self.clock.sleep,
            clock=self.clock,
            rng=random.Random(17),
            breakers=self.clock.breakers(self.catalog),
        )

    async def route(self, model: str = "chain", request_id: str = "req-1") -> Any:
        policy = self.policy
        plan, view = await self.router.plan(model, RoutingSettings(), policy)
        info = RequestInfo(request_id=request_id, org="acme", squad="research", key="ci-bot", requested_model=model)
        request = {"model": model, "messages": [{"role": "user", "content": PROMPT}]}
        with request_span(self.telemetry.tracer, info):
            return await self.router.route(request, plan=plan, view=view, policy=policy, time_left_s=30, info=info)

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())


def _harness(http: httpx.AsyncClient, **fields: str) -> Harness:
    config = parse_config(CONFIG.format(**fields), env={})
    return Harness(Catalog(config), http, config.policy)


@pytest.fixture
def mock_harness() -> Iterator[Harness]:
    http = httpx.AsyncClient(transport=httpx.MockTransport(_mock_upstream))
    yield _harness(http, a="http://pa.test:8443", b="https://pb.test", ma="m-a", mb="m-b")


def _by_name(spans: list[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name.startswith(prefix)), key=lambda s: s.start_time or 0)


def _attempts(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    return sorted(
        (s for s in spans if s.attributes and "turnout.attempt.number" in s.attributes),
        key=lambda s: int(s.attributes["turnout.attempt.number"]),  # type: ignore[index, arg-type]
    )


async def test_route_retry_then_fallback_gives_three_attempt_spans_under_the_request_span(
    mock_harness: Harness,
) -> None:
    result = await mock_harness.route()
    assert result.verdict is None and len(result.records) == 3
    spans = mock_harness.finished()
    [req] = _by_name(spans, "route ")
    attempts = _attempts(spans)
    assert [s.name for s in attempts] == ["chat m-a", "chat m-a", "chat m-b"]
    for span in attempts:
        assert span.kind is SpanKind.CLIENT
        assert span.parent is not None and span.parent.span_id == req.context.span_id
        assert span.context.trace_id == req.context.trace_id
    first, retry, fallback = (attributes(s) for s in attempts)
    assert "http.request.resend_count" not in first
    assert retry["http.request.resend_count"] == 1
    assert "http.request.resend_count" not in fallback
    # the flags are set only when true, the delay only when there was one: absent means false / none
    assert [a.get("turnout.attempt.is_fallback", False) for a in (first, retry, fallback)] == [False, False, True]
    assert [a.get("turnout.attempt.is_retry", False) for a in (first, retry, fallback)] == [False, True, False]
    assert "turnout.attempt.is_fallback" not in first and "turnout.attempt.delay_before_s" not in first
    assert not [a for a in (first, retry, fallback) if "turnout.request_id" in a]  # on the request's span
    assert first["error.type"] == "server_error" and first["turnout.attempt.class"] == "retry_then_fallback"
    assert first["turnout.attempt.kind"] == "server_error" and first["http.response.status_code"] == 503
    assert first["server.address"] == "pa.test" and first["server.port"] == 8443
    assert first["gen_ai.provider.name"] == "openai" and first["gen_ai.operation.name"] == "chat"  # openai_compatible
    assert first["turnout.provider"] == "pa"
    assert retry["turnout.attempt.delay_before_s"] > 0
    assert "error.type" not in fallback and fallback["turnout.attempt.class"] == "success"
    assert fallback["server.address"] == "pb.test" and "server.port" not in fallback
    assert fallback["gen_ai.request.model"] == "m-b" and fallback["gen_ai.response.model"] == "m-b"
    assert fallback["gen_ai.usage.input_tokens"] == 7 and fallback["gen_ai.usage.output_tokens"] == 5
    assert attempts[0].status.status_code is StatusCode.ERROR
    assert attempts[2].status.status_code is StatusCode.UNSET
    assert req.attributes is not None and req.attributes["turnout.request_id"] == "req-1"
    assert not [k for k in req.attributes if k.startswith("gen_ai.")]  # one model call per attempt span only
    waited = [e for e in req.events if e.name == EVENT_WAITED]
    assert len(waited) == 1 and waited[0].attributes is not None
    assert waited[0].attributes["turnout.wait.reason"] == "backoff"
    assert waited[0].attributes["turnout.wait.delay_s"] == pytest.approx(mock_harness.waits[0], abs=1e-6)


async def test_spans_carry_no_prompt_completion_or_key(mock_harness: Harness) -> None:
    await mock_harness.route()
    text = json.dumps(
        [
            {
                "name": s.name,
                "attributes": dict(s.attributes or {}),
                "events": [dict(e.attributes or {}) for e in s.events],
                "status": s.status.description,
            }
            for s in mock_harness.finished()
        ]
    )
    for secret in (PROMPT, COMPLETION, KEY_A, KEY_B, "overloaded"):
        assert secret not in text


def _trace_only(harness: Harness, seen: list[httpx.Headers]) -> None:
    """`harness` with the trace observer alone (GenAI metrics only with a metric reader), its
    upstream requests' headers appended to `seen`."""

    def upstream(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers)
        return _mock_upstream(request)

    harness.http = httpx.AsyncClient(transport=httpx.MockTransport(upstream))
    telemetry = harness.telemetry
    harness.router = harness.router_with(SpanObserver(telemetry.tracing, harness.catalog, telemetry.metering))


async def test_each_attempt_has_an_http_client_span_beneath_whose_context_rides_upstream_as_traceparent(
    mock_harness: Harness,
) -> None:
    seen: list[httpx.Headers] = []
    _trace_only(mock_harness, seen)
    await mock_harness.route()
    spans = mock_harness.finished()
    attempts = _attempts(spans)
    http = [s for s in spans if s.name == "POST"]
    assert [s.kind for s in spans].count(SpanKind.CLIENT) == len(attempts) + len(http) == 6  # SPEC §9
    assert [h.parent.span_id for h in http if h.parent] == [a.context.span_id for a in attempts]
    assert [attributes(h)["http.response.status_code"] for h in http] == [503, 503, 200]
    assert [attributes(h).get("error.type") for h in http] == ["503", "503", None]
    assert {attributes(h)["http.request.method"] for h in http} == {"POST"}
    assert {attributes(h)["server.address"] for h in http} == {"pa.test", "pb.test"}
    sent = [propagate.extract(dict(h)) for h in seen]
    assert [trace.get_current_span(c).get_span_context().span_id for c in sent] == [h.context.span_id for h in http]


async def test_the_production_client_keeps_its_direct_path_with_tracing_on() -> None:
    runner, sim_url = await start_in_background("127.0.0.1", 0)
    http = make_http_client(max_connections=10)
    try:
        harness = _harness(http, a=sim_url, b=sim_url, ma="tel-a~503,503", mb="tel-b")
        assert direct_transport(http) is not None  # nothing wraps the transport: httpx's layers stay skipped
        result = await harness.route()
        assert result.verdict is None and len(result.records) == 3
        attempts = _attempts(harness.finished())
        assert [s.name for s in attempts] == ["chat tel-a~503,503", "chat tel-a~503,503", "chat tel-b"]
        assert [attributes(s)["http.response.status_code"] for s in attempts] == [503, 503, 200]
    finally:
        await http.aclose()
        await runner.cleanup()


async def test_genai_client_metrics_record_duration_and_tokens(mock_harness: Harness) -> None:
    await mock_harness.route()
    data = mock_harness.reader.get_metrics_data()
    assert data is not None
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    duration = metrics["gen_ai.client.operation.duration"]
    assert duration.unit == "s"
    points = [p for p in duration.data.data_points if isinstance(p, HistogramDataPoint)]
    errors = [p for p in points if p.attributes and p.attributes.get("error.type") == "server_error"]
    ok = [p for p in points if p.attributes and "error.type" not in p.attributes]
    assert sum(p.count for p in errors) == 2 and sum(p.count for p in ok) == 1
    tokens = {
        attributes(p)["gen_ai.token.type"]: p.sum
        for p in metrics["gen_ai.client.token.usage"].data.data_points
        if isinstance(p, HistogramDataPoint)
    }
    assert tokens == {"input": 7, "output": 5}


async def test_prometheus_observer_counts_attempts_fallbacks_and_latency(mock_harness: Harness) -> None:
    await mock_harness.route()
    reg = mock_harness.metrics.registry
    # the model label is the catalog model id (`chain`), never the upstream's model name
    assert (
        reg.get_sample_value("turnout_attempts_total", {"provider": "pa", "model": "chain", "kind": "server_error"})
        == 2
    )
    assert reg.get_sample_value("turnout_attempts_total", {"provider": "pb", "model": "chain", "kind": "success"}) == 1
    assert reg.get_sample_value("turnout_fallbacks_total", {"model": "chain"}) == 1
    assert reg.get_sample_value("turnout_upstream_latency_seconds_count", {"provider": "pa", "model": "chain"}) == 2


async def test_served_attempts_count_tokens_and_the_spend_observers_cost_by_provider_model_and_org(
    mock_harness: Harness,
) -> None:
    metrics = Metrics()
    ledger = SpendLedger(Redis(port=1))  # buffers in memory; never flushed here
    mock_harness.router = mock_harness.router_with(
        Observers(PrometheusObserver(metrics), SpendObserver(ledger, mock_harness.catalog, metrics))
    )
    await mock_harness.route()  # pa fails twice (no tokens, no cost), pb serves 7 in + 5 out at $3 / $4 per Mtok
    sample = metrics.registry.get_sample_value
    served = {"provider": "pb", "model": "chain", "org": "acme"}
    assert sample("turnout_gen_ai_client_token_usage_total", {**served, "token_type": "input"}) == 7
    assert sample("turnout_gen_ai_client_token_usage_total", {**served, "token_type": "output"}) == 5
    assert sample("turnout_cost_usd_total", served) == pytest.approx((7 * 3 + 5 * 4) / 1e6)
    failed = {"provider": "pa", "model": "chain", "org": "acme"}
    assert sample("turnout_gen_ai_client_token_usage_total", {**failed, "token_type": "input"}) is None
    assert sample("turnout_cost_usd_total", failed) is None
    assert b"_created" not in metrics.exposition()


def test_the_job_span_continues_the_ingress_span_through_the_carrier() -> None:
    spans = InMemorySpanExporter()
    ingress = setup_tracing("turnout-ingress", env={}, span_exporters=[spans])
    worker = setup_tracing("turnout-worker", env={}, span_exporters=[spans])
    with ingress.tracer.start_as_current_span("POST /v1/chat/completions", kind=SpanKind.SERVER):
        with job_trace("rid-1") as carrier:
            pass
    assert set(carrier) >= {"traceparent"}
    with job_span(worker.tracer, carrier, "rid-1", 0.25):
        pass
    server, consumer = spans.get_finished_spans()  # no span of the enqueue's own
    assert consumer.kind is SpanKind.CONSUMER
    assert consumer.context.trace_id == server.context.trace_id
    assert consumer.parent is not None and consumer.parent.span_id == server.context.span_id
    assert consumer.resource.attributes["service.name"] == "turnout-worker"
    assert attributes(consumer) == {
        "messaging.system": "arq",
        "messaging.operation.type": "process",
        "messaging.destination.name": "arq:queue",
        "turnout.request_id": "rid-1",
        "turnout.queue.wait_s": 0.25,
    }


def test_without_an_exporter_spans_are_unrecorded_but_carry_trace_ids() -> None:
    telemetry = setup_tracing("turnout-worker", env={"OTEL_TRACES_EXPORTER": "none"})
    assert not telemetry.exporting
    with telemetry.tracer.start_as_current_span("x") as span:
        assert not span.is_recording()
        assert span.get_span_context().is_valid
        with job_trace("rid") as carrier:
            assert int(carrier["traceparent"].rsplit("-", 1)[1], 16) & 1 == 0  # propagated, not sampled


async def test_with_tracing_off_routing_starts_no_span_and_sends_no_trace_header(
    mock_harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    off = setup_tracing("turnout-worker", env={})
    assert off.tracing is None and off.metering is None
    started: list[str] = []
    injected: list[object] = []
    real_start_span = SdkTracer.start_span

    def counting_start_span(self: SdkTracer, name: str, *args: Any, **kwargs: Any) -> Any:
        started.append(name)
        return real_start_span(self, name, *args, **kwargs)

    monkeypatch.setattr(SdkTracer, "start_span", counting_start_span)
    monkeypatch.setattr(propagate, "inject", lambda carrier, *a, **k: injected.append(carrier))
    seen: list[httpx.Headers] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers)
        return _mock_upstream(request)

    mock_harness.http = httpx.AsyncClient(transport=httpx.MockTransport(upstream))
    metrics = Metrics()
    mock_harness.router = mock_harness.router_with(
        route_observers(off.tracing, mock_harness.catalog, meter=off.metering, metrics=metrics)
    )
    plan, view = await mock_harness.router.plan("chain", RoutingSettings(), mock_harness.policy)
    info = RequestInfo(request_id="off-1", requested_model="chain")
    request = {"model": "chain", "messages": [{"role": "user", "content": PROMPT}]}
    with job_span(off.tracing, {}, "off-1", 0.1) as job, request_span(off.tracing, info) as req:
        assert job is req is trace.INVALID_SPAN
        result = await mock_harness.router.route(
            request, plan=plan, view=view, policy=mock_harness.policy, time_left_s=30, info=info
        )
    assert result.verdict is None and len(result.records) == 3
    assert started == [] and injected == []
    assert len(seen) == 3 and not [h for h in seen if "traceparent" in h]
    assert metrics.registry.get_sample_value(  # the other observers still see every attempt
        "turnout_attempts_total", {"provider": "pb", "model": "chain", "kind": "success"}
    )


def test_without_a_metric_reader_or_tracing_no_trace_observer_is_built() -> None:
    off = setup_tracing("turnout-worker", env={})
    catalog = Catalog(parse_config(CONFIG.format(a="http://a", b="http://b", ma="m", mb="m"), env={}))
    assert not [o for o in route_observers(off.tracing, catalog)._observers if isinstance(o, SpanObserver)]
    metered = setup_tracing("turnout-worker", env={}, metric_readers=[InMemoryMetricReader()])
    assert metered.tracing is None and metered.metering is not None
    (spans,) = route_observers(metered.tracing, catalog, meter=metered.metering)._observers
    assert isinstance(spans, SpanObserver)  # the GenAI metrics, without spans


def test_trace_file_exporter_appends_one_json_line_per_span(tmp_path: Any) -> None:
    path = tmp_path / "spans.jsonl"
    telemetry = setup_tracing("turnout-worker", env={"TURNOUT_TRACE_FILE": str(path)})
    assert telemetry.exporting
    with telemetry.tracer.start_as_current_span("outer"):
        with telemetry.tracer.start_as_current_span("inner", attributes={"a": 1}):
            pass
    telemetry.shutdown()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [d["name"] for d in lines] == ["inner", "outer"]
    assert lines[0]["parent_span_id"] == lines[1]["span_id"] and lines[0]["trace_id"] == lines[1]["trace_id"]
    assert lines[0]["attributes"] == {"a": 1} and lines[0]["service"] == "turnout-worker"


async def test_attempt_ended_in_another_task_ends_the_span_without_touching_that_context(
    mock_harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """A committed stream's attempt ends from the relay's task."""
    observer = SpanObserver(mock_harness.telemetry.tracer, mock_harness.catalog)
    record = (await mock_harness.route()).records[-1]
    plan, _ = await mock_harness.router.plan("chain", RoutingSettings(), mock_harness.policy)
    dispatch = Dispatch(
        entry=plan.entries[0],
        number=1,
        timeout_s=1.0,
        is_retry=False,
        resend_count=0,
        delay_before_s=0.0,
        delay_reason=None,
    )
    info = RequestInfo(request_id="stream-1", requested_model="chain", streaming=True)

    async def routing() -> object:
        return observer.attempt_started(info, dispatch)

    async def relay(handle: object) -> None:
        observer.attempt_ended(handle, info, record, Usage(input_tokens=1, output_tokens=2))

    loop = asyncio.get_running_loop()
    with caplog.at_level(logging.ERROR):
        handle = await loop.create_task(routing())
        await loop.create_task(relay(handle))
    assert not caplog.records
    assert not trace.get_current_span().get_span_context().is_valid
    ended = [s for s in mock_harness.finished() if s.parent is None and s.name.startswith("chat ")]
    assert len(ended) == 1 and ended[0].attributes["gen_ai.usage.output_tokens"] == 2  # type: ignore[index]


async def test_a_failing_observer_never_fails_the_request(mock_harness: Harness) -> None:
    calls: list[str] = []

    class Broken:
        def attempt_started(self, info: RequestInfo, dispatch: Any) -> object:
            raise RuntimeError("boom")

        async def attempt_dispatched(self, handle: object) -> None:
            raise RuntimeError("boom")

        def attempt_ended(self, handle: object, info: RequestInfo, record: Any, usage: Usage) -> None:
            raise RuntimeError("boom")

        def waited(self, info: RequestInfo, delay_s: float, reason: str) -> None:
            raise RuntimeError("boom")

    class Counting:
        def attempt_started(self, info: RequestInfo, dispatch: Any) -> object:
            calls.append("start")
            return "h"

        async def attempt_dispatched(self, handle: object) -> None:
            calls.append(f"dispatched:{handle}")

        def attempt_ended(self, handle: object, info: RequestInfo, record: Any, usage: Usage) -> None:
            calls.append(f"end:{handle}")

        def waited(self, info: RequestInfo, delay_s: float, reason: str) -> None:
            calls.append("wait")

    mock_harness.router = mock_harness.router_with(Observers(Broken(), Counting()))
    result = await mock_harness.route()
    assert result.verdict is None
    assert calls == [
        "start",
        "dispatched:h",
        "end:h",
        "wait",
        "start",
        "dispatched:h",
        "end:h",
        "start",
        "dispatched:h",
        "end:h",
    ]


async def test_exported_spans_carry_no_url_query_and_no_known_key() -> None:
    spans = InMemorySpanExporter()
    scrubber = Scrubber(["plat-Zq81mXv0Lr5Tn2Wk9Yb3Hc6"])
    telemetry = setup_tracing("turnout-test", env={}, span_exporters=[spans], scrub=scrubber.credentials)
    http = httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200, json={})))
    HTTPXClientInstrumentor.instrument_client(http, tracer_provider=telemetry.tracer_provider)
    await http.get("https://generativelanguage.example/v1/models?key=AIzaSyQueryKey0123456789&alt=json")
    with telemetry.tracer.start_as_current_span(
        "server",
        attributes={
            "url.query": "api_key=client-secret-1",
            "http.target": "/v1/models?api_key=client-secret-1",
            "note": "upstream quoted plat-Zq81mXv0Lr5T",
        },
    ) as span:
        span.add_event("exception", {"exception.message": "Incorrect API key provided: plat-Zq81mXv0Lr5Tn2Wk9Yb3Hc6"})
    await http.aclose()
    text = repr(
        [(s.attributes, [e.attributes for e in s.events], s.status.description) for s in spans.get_finished_spans()]
    )
    assert "https://generativelanguage.example/v1/models?[redacted]" in text
    for secret in ("AIzaSyQueryKey", "client-secret-1", "plat-Zq81", "Lr5Tn2Wk"):
        assert secret not in text


async def test_an_attempt_span_names_a_google_provider_by_its_semconv_name() -> None:
    def gemini(request: httpx.Request) -> httpx.Response:
        parts = [{"text": COMPLETION}]
        return httpx.Response(200, json={"candidates": [{"content": {"parts": parts}, "finishReason": "STOP"}]})

    text = CONFIG.replace('kind: openai_compatible, base_url: "{a}/v1"', 'kind: gemini, base_url: "{a}"')
    config = parse_config(text.format(a="https://gem.test", b="https://pb.test", ma="flash", mb="m-b"), env={})
    async with httpx.AsyncClient(transport=httpx.MockTransport(gemini)) as http:
        harness = Harness(Catalog(config), http, config.policy)
        result = await harness.route()
    assert result.verdict is None
    [attempt] = (attributes(s) for s in _attempts(harness.finished()))
    assert attempt["gen_ai.provider.name"] == "gcp.gemini" and attempt["turnout.provider"] == "pa"


async def _route_as_a_job(harness: Harness, carrier: dict[str, str], seen: list[httpx.Headers]) -> None:
    """Route the chain as a worker's job does: under the job span, which carries the request."""
    _trace_only(harness, seen)
    plan, view = await harness.router.plan("chain", RoutingSettings(), harness.policy)
    info = RequestInfo(request_id="job-1", org="acme", squad="research", key="ci-bot", requested_model="chain")
    request = {"model": "chain", "messages": [{"role": "user", "content": PROMPT}]}
    with (
        job_span(harness.telemetry.tracing, carrier, "job-1", 0.1),
        request_span(harness.telemetry.tracing, info, own=False),
    ):
        await harness.router.route(request, plan=plan, view=view, policy=harness.policy, time_left_s=30, info=info)


async def test_a_jobs_span_carries_its_request_and_the_attempts_nest_in_it(mock_harness: Harness) -> None:
    await _route_as_a_job(mock_harness, {}, [])
    spans = mock_harness.finished()
    [job] = [s for s in spans if s.kind is SpanKind.CONSUMER]
    attempts = _attempts(spans)
    assert len(spans) == 1 + 2 * len(attempts) == 7  # no request span of its own; an HTTP span beneath each attempt
    assert all(a.parent is not None and a.parent.span_id == job.context.span_id for a in attempts)
    assert {k: v for k, v in attributes(job).items() if k.startswith("turnout.")} == {
        "turnout.request_id": "job-1",
        "turnout.queue.wait_s": 0.1,
        "turnout.requested_model": "chain",
        "turnout.org": "acme",
        "turnout.squad": "research",
        "turnout.key": "ci-bot",
    }
    assert [e.name for e in job.events] == [EVENT_WAITED]


async def test_a_trace_the_sampler_dropped_builds_nothing_below_the_job_and_still_propagates(
    mock_harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_always_off")
    mock_harness.telemetry = setup_tracing("turnout-worker", env={}, span_exporters=[mock_harness.spans])
    built: list[str] = []
    monkeypatch.setattr(SpanObserver, "_call_of", lambda self, target: built.append("attempt"))
    monkeypatch.setattr(telemetry_module, "_request_attributes", lambda info: built.append("request"))
    dropped = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"  # the ingress's sampler said no
    seen: list[httpx.Headers] = []
    await _route_as_a_job(mock_harness, {"traceparent": dropped}, seen)
    assert mock_harness.finished() == [] and built == []
    assert len(seen) == 3 and {h["traceparent"].split("-")[1] for h in seen} == {"4bf92f3577b34da6a3ce929d0e0e4736"}
    assert {h["traceparent"][-2:] for h in seen} == {"00"}  # the upstream is told the trace is not sampled
