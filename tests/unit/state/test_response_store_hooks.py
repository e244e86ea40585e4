"""The Responses surface's hooks against the conversation store (`turnout_ingress.surfaces.responses.surface`,
`turnout.state.response_store`): a store that fails after an answer loses no answer (logged and counted), an unreachable
store at `prepare` is a 503, an unknown `previous_response_id` a 404, and a stored conversation leads the new turn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, cast

import msgspec
import pytest
from redis.asyncio import Redis

from turnout.catalog import Catalog
from turnout.config import parse_config
from turnout.errors import GatewayUnavailable, RequestRejected
from turnout.observability.metrics import Metrics
from turnout.state.response_store import ResponseStore
from turnout_ingress.surfaces.responses.surface import RESPONSES, ResponsesTurn

IDENTITY: Any = SimpleNamespace(org="acme", key="main")
COMPLETION = {
    "id": "c",
    "model": "served",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
}


@pytest.fixture
async def broken() -> AsyncIterator[Redis]:
    client = Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    yield client
    await client.aclose()


CATALOG = """\
providers:
  oai: {kind: openai, base_url: "http://oai.test/v1", api_key: k}
models:
  m: {offers: [{provider: oai, model: m-chat}]}
  deep: {offers: [{provider: oai, model: deep-up, api: responses}]}
"""


def _state(redis: Redis, catalog: str = CATALOG) -> Any:
    store = ResponseStore(redis, ttl_s=3600, per_org=10, max_bytes=100_000, clock=lambda: 1000.0)
    return SimpleNamespace(
        responses=store, metrics=Metrics(), clock=lambda: 1000.0, catalog=Catalog(parse_config(catalog, env={}))
    )


def _raw(**fields: Any) -> bytes:
    return msgspec.json.encode({"model": "m", "input": "hi", **fields})


def _not_stored(state: Any, reason: str) -> float:
    return cast(
        float, state.metrics.registry.get_sample_value("turnout_responses_not_stored_total", {"reason": reason})
    )


async def test_a_store_failure_after_the_answer_is_counted_and_the_answer_still_goes_out(broken: Redis) -> None:
    state = _state(broken)
    inbound = await RESPONSES.prepare(state, RESPONSES.parse(_raw(), {}), IDENTITY, "r1")
    answer = RESPONSES.render(200, msgspec.json.encode(COMPLETION), {"x-request-id": "r1"}, "r1", inbound)
    await RESPONSES.settle(state, inbound)
    body = msgspec.json.decode(answer.body)
    assert answer.status_code == 200 and body["id"] == "resp_r1" and body["output"][0]["content"][0]["text"] == "hello"
    assert _not_stored(state, "redis_unavailable") == 1


async def test_an_unreachable_store_for_previous_response_id_is_a_503(broken: Redis) -> None:
    with pytest.raises(GatewayUnavailable) as caught:
        await RESPONSES.prepare(
            _state(broken), RESPONSES.parse(_raw(previous_response_id="resp_x"), {}), IDENTITY, "r2"
        )
    assert caught.value.code == "redis_unavailable"


async def test_a_stored_conversation_leads_the_new_turn_and_an_unknown_id_is_a_404(redis_client: Redis) -> None:
    state = _state(redis_client)
    first = await RESPONSES.prepare(state, RESPONSES.parse(_raw(instructions="be brief"), {}), IDENTITY, "r1")
    RESPONSES.render(200, msgspec.json.encode(COMPLETION), {"x-request-id": "r1"}, "r1", first)
    await RESPONSES.settle(state, first)
    second = await RESPONSES.prepare(
        state, RESPONSES.parse(_raw(input="again", previous_response_id="resp_r1"), {}), IDENTITY, "r2"
    )
    assert second.body["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "again"},
    ]
    assert msgspec.json.decode(second.job_body) == second.body and isinstance(second.context, ResponsesTurn)
    with pytest.raises(RequestRejected) as caught:
        await RESPONSES.prepare(state, RESPONSES.parse(_raw(previous_response_id="resp_r9"), {}), IDENTITY, "r3")
    assert (caught.value.status_code, caught.value.code, caught.value.param) == (
        404,
        "previous_response_not_found",
        "previous_response_id",
    )


async def test_store_false_keeps_nothing_and_an_error_answer_passes_as_it_is(redis_client: Redis) -> None:
    state = _state(redis_client)
    inbound = await RESPONSES.prepare(state, RESPONSES.parse(_raw(store=False), {}), IDENTITY, "r1")
    RESPONSES.render(200, msgspec.json.encode(COMPLETION), {"x-request-id": "r1"}, "r1", inbound)
    await RESPONSES.settle(state, inbound)
    assert await state.responses.get("acme", "main", "resp_r1") is None
    error = b'{"error":{"message":"no","type":"x","param":null,"code":"provider_failed"}}'
    answer = RESPONSES.render(502, error, {"x-turnout-attempts": "2"}, "r1", inbound)
    assert (answer.status_code, answer.body, answer.headers["x-turnout-attempts"]) == (502, error, "2")


async def test_a_native_follow_up_carries_the_stored_items_and_a_native_answer_is_kept(redis_client: Redis) -> None:
    state = _state(redis_client)
    first = await RESPONSES.prepare(state, RESPONSES.parse(_raw(model="deep", input="first"), {}), IDENTITY, "n1")
    assert first.native is not None and msgspec.json.decode(first.native.body)["store"] is False
    upstream = {
        "id": "resp_up",
        "object": "response",
        "status": "completed",
        "store": False,
        "output": [
            {
                "type": "message",
                "id": "msg_up",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "one"}],
            }
        ],
    }
    answer = RESPONSES.render(200, msgspec.json.encode(upstream), {"x-request-id": "n1"}, "n1", first, "responses")
    assert msgspec.json.decode(answer.body)["id"] == "resp_n1"
    await RESPONSES.settle(state, first)
    second = await RESPONSES.prepare(
        state, RESPONSES.parse(_raw(model="deep", input="second", previous_response_id="resp_n1"), {}), IDENTITY, "n2"
    )
    assert second.native is not None
    body = msgspec.json.decode(second.native.body)
    assert body["input"] == [
        {"role": "user", "content": "first"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "one"}]},
        {"role": "user", "content": "second"},
    ]
    assert "previous_response_id" not in body and body["store"] is False
    assert second.body["messages"][-2:] == [
        {"role": "assistant", "content": "one"},
        {"role": "user", "content": "second"},
    ]


async def test_without_an_api_responses_offer_nothing_is_carried(redis_client: Redis) -> None:
    chat_only = CATALOG.replace(", api: responses", "")
    inbound = await RESPONSES.prepare(_state(redis_client, chat_only), RESPONSES.parse(_raw(), {}), IDENTITY, "c1")
    assert inbound.native is None
    forced = _raw(tools=[{"type": "web_search"}], tool_choice="required")
    with pytest.raises(RequestRejected) as caught:
        await RESPONSES.prepare(_state(redis_client), RESPONSES.parse(forced, {}), IDENTITY, "c2")
    assert (caught.value.code, caught.value.param) == ("unsupported_tool", "tools[0].type")
