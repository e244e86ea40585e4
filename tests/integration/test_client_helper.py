"""`turnout_client` with the official `openai` and `anthropic` SDKs against the real fleet.

Routing events on plain and streamed answers, the client-side model chain
after an exhausted gateway chain, and one Idempotency-Key across an SDK
retry (the gateway replays instead of calling the provider twice).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from support.client_fleet import KEY, KEY_LAST, client_fleet
from support.gateway import Gateway
from turnout_client import GatewayRouting, gateway_http_client, http_package, routing_of, span_hook

pytestmark = pytest.mark.integration

MESSAGES: Any = [{"role": "user", "content": "hello there"}]


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    """Its own fleet (`support.client_fleet`)."""
    yield from client_fleet()


def _openai(gw: Gateway, events: list[GatewayRouting], key: str = KEY, **options: Any) -> openai.OpenAI:
    http = gateway_http_client(on_routing=events.append, **options)
    return openai.OpenAI(base_url=f"{gw.base_url}/v1", api_key=key, http_client=http, max_retries=2)


def test_openai_sdk_answer_carries_the_routing_event(gateway: Gateway) -> None:
    events: list[GatewayRouting] = []
    with _openai(gateway, events) as client:
        raw = client.chat.completions.with_raw_response.create(model="down-primary", messages=MESSAGES)
    assert raw.parse().choices[0].message.content
    [event] = events
    assert (event.provider, event.model, event.fallback, event.status) == ("sim-b", "ch-dp-b", True, 200)
    assert event.attempts is not None and event.attempts >= 1
    assert event.request_id == raw.headers["x-request-id"]
    assert routing_of(raw) is event


def test_openai_sdk_stream_gets_the_event_before_the_first_chunk(gateway: Gateway) -> None:
    events: list[GatewayRouting] = []
    with _openai(gateway, events) as client:
        stream = client.chat.completions.create(model="down-primary", messages=MESSAGES, stream=True, max_tokens=5)
        assert [(e.provider, e.fallback) for e in events] == [("sim-b", True)]  # nothing read yet
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text.startswith("tok0")


def test_client_model_chain_serves_after_the_gateway_chain_is_exhausted(gateway: Gateway) -> None:
    events: list[GatewayRouting] = []

    def upstream_calls() -> int:
        return len(gateway.sim_log("ch-af-a~503")) + len(gateway.sim_log("ch-af-b~500"))

    before = upstream_calls()
    with _openai(gateway, events, model_chain={"all-fail": ["ok"]}) as client:
        completion = client.chat.completions.create(model="all-fail", messages=MESSAGES)
    assert completion.choices[0].message.content
    first, served = events
    assert first.status == 502 and first.should_retry is False and first.chain_exhausted
    assert (served.status, served.provider, served.requested_model, served.chain_index) == (200, "sim-a", "ok", 1)
    # all-fail was sent once: its upstream calls are the gateway's own attempts, no SDK retry on top
    assert upstream_calls() - before == first.attempts


def test_client_model_chain_moves_on_an_exhausted_answer_in_the_upstreams_own_status(gateway: Gateway) -> None:
    events: list[GatewayRouting] = []
    with _openai(gateway, events, key=KEY_LAST, model_chain={"all-fail": ["ok"]}) as client:
        completion = client.chat.completions.create(model="all-fail", messages=MESSAGES)
    assert completion.choices[0].message.content
    first, served = events
    assert (first.status, first.exhausted_answer, first.should_retry, first.chain_exhausted) == (
        500,
        "last",
        False,
        True,
    )
    assert first.attempt_summary and "ch-af-b~500 500" in first.attempt_summary
    assert (served.status, served.requested_model, served.chain_index) == (200, "ok", 1)


class DropsTheFirstAnswer:
    """An inner transport that loses the first answer after the gateway made it (a cut connection)."""

    def __init__(self) -> None:
        self.pkg = http_package()
        self.inner = self.pkg.HTTPTransport()
        self.dropped = False

    def handle_request(self, request: Any) -> Any:
        response = self.inner.handle_request(request)
        if not self.dropped:
            self.dropped = True
            response.read()
            response.close()
            raise self.pkg.ReadError("connection lost after the answer was made", request=request)
        return response

    def close(self) -> None:
        self.inner.close()


def test_sdk_retry_after_a_lost_answer_is_replayed_not_paid_twice(gateway: Gateway) -> None:
    events: list[GatewayRouting] = []
    before = len(gateway.sim_log("ch-ok"))
    with _openai(gateway, events, transport=DropsTheFirstAnswer()) as client:
        raw = client.chat.completions.with_raw_response.create(model="ok", messages=MESSAGES)
    assert raw.parse().choices[0].message.content
    assert raw.headers["x-turnout-idempotent-replay"] == "1"
    assert [e.idempotent_replay for e in events] == [True]  # the lost answer never reached the helper
    assert len(gateway.sim_log("ch-ok")) - before == 1, "the provider was called twice"


def test_anthropic_sdk_gets_the_routing_event(gateway: Gateway) -> None:
    events: list[GatewayRouting] = []
    with anthropic.Anthropic(
        base_url=gateway.base_url, api_key=KEY, http_client=gateway_http_client(on_routing=events.append)
    ) as client:
        message = client.messages.create(model="down-primary", max_tokens=20, messages=MESSAGES)
    assert message.content
    [event] = events
    assert (event.provider, event.fallback) == ("sim-b", True)


def test_span_hook_puts_the_event_on_the_callers_span(gateway: Gateway) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    client = openai.OpenAI(
        base_url=f"{gateway.base_url}/v1", api_key=KEY, http_client=gateway_http_client(on_routing=span_hook)
    )
    with client, provider.get_tracer("caller").start_as_current_span("answer-question"):
        client.chat.completions.create(model="down-primary", messages=MESSAGES)
    [span] = exporter.get_finished_spans()
    assert span.attributes is not None and span.attributes["turnout.provider"] == "sim-b"
    assert [e.name for e in span.events] == ["turnout.routing"]
