"""`POST /v1/responses` through the official `openai` SDK: items, tools, formats, streaming, store, faults."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage

from turnout_sim.responses_handler import ResponseStore

TEXT12 = " ".join(f"tok{i}" for i in range(12))
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "unit": {"enum": ["c", "f"]}},
    "required": ["city"],
}
TOOLS: Any = [{"type": "function", "name": "get_weather", "parameters": SCHEMA, "strict": False}]
ARGS = {"city": "sim", "days": 1, "unit": "c"}


@pytest.fixture
async def oai(sim_url: str) -> AsyncIterator[openai.AsyncOpenAI]:
    client = openai.AsyncOpenAI(base_url=f"{sim_url}/v1", api_key="x", max_retries=0, timeout=5.0)
    try:
        yield client
    finally:
        await client.close()


def _events(raw: bytes) -> list[dict[str, Any]]:
    out = []
    for block in raw.decode().strip().split("\n\n"):
        name, data = block.split("\n")
        event = json.loads(data.removeprefix("data: "))
        assert name == f"event: {event['type']}"
        out.append(event)
    return out


async def test_string_input_answers_a_completed_response(oai: openai.AsyncOpenAI) -> None:
    result = await oai.responses.create(model="gpt-4.1", input="hello there", instructions="be brief")
    assert result.id.startswith("resp_") and result.object == "response" and result.status == "completed"
    assert result.output_text == TEXT12 and result.instructions == "be brief"
    [item] = result.output
    assert isinstance(item, ResponseOutputMessage) and item.id.startswith("msg_") and item.status == "completed"
    assert result.usage is not None and result.usage.input_tokens == 4 and result.usage.output_tokens == 12
    assert result.usage.total_tokens == 16 and result.usage.output_tokens_details.reasoning_tokens == 0
    assert result.error is None and result.incomplete_details is None and result.tools == []


async def test_item_input_and_echo_fields(oai: openai.AsyncOpenAI) -> None:
    items: Any = [
        {"role": "system", "content": "x"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a b"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "c"}]},
        {"role": "user", "content": [{"type": "input_image", "image_url": "https://example.com/i.png"}]},
    ]
    result = await oai.responses.create(
        model="gpt-4.1", input=items, temperature=0.5, top_p=0.9, metadata={"k": "v"}, store=False, reasoning={}
    )
    assert result.output_text == TEXT12
    assert (result.temperature, result.top_p, result.metadata) == (0.5, 0.9, {"k": "v"})
    assert result.model_dump()["store"] is False
    assert result.usage is not None and result.usage.input_tokens == 4


async def test_max_output_tokens_makes_it_incomplete(oai: openai.AsyncOpenAI) -> None:
    result = await oai.responses.create(model="gpt-4.1", input="hi", max_output_tokens=3)
    assert result.status == "incomplete" and result.output_text == "tok0 tok1 tok2"
    assert result.incomplete_details is not None and result.incomplete_details.reason == "max_output_tokens"
    longer = await oai.responses.create(model="m~len20", input="hi", max_output_tokens=30)
    assert longer.status == "completed" and len(longer.output_text.split()) == 20


async def test_function_tool_round_trip(oai: openai.AsyncOpenAI) -> None:
    first = await oai.responses.create(model="gpt-4.1", input="weather?", tools=TOOLS)
    [call] = first.output
    assert isinstance(call, ResponseFunctionToolCall)
    assert call.id is not None and call.id.startswith("fc_") and call.call_id.startswith("call_")
    assert call.name == "get_weather" and json.loads(call.arguments) == ARGS and call.status == "completed"
    follow: Any = [
        {"role": "user", "content": "weather?"},
        {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "22C sunny"},
    ]
    second = await oai.responses.create(model="gpt-4.1", input=follow, tools=TOOLS)
    assert second.output_text == "Tool result: 22C sunny"
    none = await oai.responses.create(model="gpt-4.1", input="weather?", tools=TOOLS, tool_choice="none")
    assert none.output_text == TEXT12


async def test_web_search_answers_a_search_call_then_text(oai: openai.AsyncOpenAI) -> None:
    result = await oai.responses.create(model="gpt-4.1", input="news today", tools=[{"type": "web_search"}])
    assert [item.type for item in result.output] == ["web_search_call", "message"]
    assert result.output_text == TEXT12


async def test_json_schema_format_answers_json(oai: openai.AsyncOpenAI) -> None:
    result = await oai.responses.create(
        model="gpt-4.1",
        input="weather as json",
        text={"format": {"type": "json_schema", "name": "weather", "schema": SCHEMA}},
    )
    assert json.loads(result.output_text) == ARGS
    loose = await oai.responses.create(model="gpt-4.1", input="json please", text={"format": {"type": "json_object"}})
    assert json.loads(loose.output_text) == {"answer": TEXT12}


async def test_stream_assembles_text(oai: openai.AsyncOpenAI) -> None:
    async with oai.responses.stream(model="gpt-4.1", input="hi", instructions="x") as stream:
        deltas = [event.delta async for event in stream if event.type == "response.output_text.delta"]
        final = await stream.get_final_response()
    assert "".join(deltas) == TEXT12 and len(deltas) == 12
    assert final.output_text == TEXT12 and final.status == "completed"


async def test_stream_assembles_a_function_call(oai: openai.AsyncOpenAI) -> None:
    async with oai.responses.stream(model="gpt-4.1", input="weather?", tools=TOOLS) as stream:
        kinds = [event.type async for event in stream]
        final = await stream.get_final_response()
    assert kinds.count("response.function_call_arguments.delta") > 1
    [call] = final.output
    assert isinstance(call, ResponseFunctionToolCall) and json.loads(call.arguments) == ARGS


async def test_stream_event_sequence_is_numbered_and_named(sim_url: str) -> None:
    async with httpx.AsyncClient(base_url=sim_url, headers={"Authorization": "Bearer x"}) as http:
        raw = (await http.post("/v1/responses", json={"model": "m", "input": "hi", "stream": True})).content
    events = _events(raw)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * 12,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert events[4]["item_id"] == events[2]["item"]["id"] and events[4]["output_index"] == 0
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == TEXT12


async def test_create_stream_true_and_incomplete_event(oai: openai.AsyncOpenAI) -> None:
    stream = await oai.responses.create(model="gpt-4.1", input="hi", stream=True, max_output_tokens=2)
    kinds = [event.type async for event in stream]
    assert kinds[-1] == "response.incomplete" and kinds.count("response.output_text.delta") == 2


async def test_previous_response_id_needs_a_stored_response(oai: openai.AsyncOpenAI) -> None:
    first = await oai.responses.create(model="gpt-4.1", input="hi")
    second = await oai.responses.create(model="gpt-4.1", input="more", previous_response_id=first.id)
    assert second.previous_response_id == first.id and second.output_text == TEXT12
    with pytest.raises(openai.BadRequestError) as missing:
        await oai.responses.create(model="gpt-4.1", input="more", previous_response_id="resp_nope")
    assert missing.value.code == "previous_response_not_found" and missing.value.param == "previous_response_id"
    unstored = await oai.responses.create(model="gpt-4.1", input="hi", store=False)
    with pytest.raises(openai.BadRequestError):
        await oai.responses.create(model="gpt-4.1", input="more", previous_response_id=unstored.id)


def test_the_store_forgets_the_oldest_past_its_size() -> None:
    store = ResponseStore(size=2)
    for n in range(3):
        store.keep({"id": f"resp_{n}"})
    assert "resp_0" not in store and "resp_1" in store and "resp_2" in store and len(store) == 2


async def test_503_then_success_through_the_sdk(oai: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.InternalServerError) as failed:
        await oai.responses.create(model="r~503,200", input="hi")
    assert failed.value.status_code == 503 and failed.value.type == "server_error"
    result = await oai.responses.create(model="r~503,200", input="hi")
    assert result.output_text == TEXT12
    with pytest.raises(openai.RateLimitError) as limited:
        await oai.responses.create(model="r~429ra3", input="hi", stream=True)
    assert limited.value.response.headers["retry-after"] == "3"


async def test_cut_stream_after_commit(oai: openai.AsyncOpenAI) -> None:
    seen: list[str] = []
    with pytest.raises(openai.APIConnectionError):
        async with oai.responses.stream(model="c~cut3", input="hi") as stream:
            async for event in stream:
                seen.append(event.type)
    assert seen[:2] == ["response.created", "response.in_progress"]
    assert seen.count("response.output_text.delta") == 3 and "response.completed" not in seen


async def test_failure_after_commit_is_a_response_failed_event(oai: openai.AsyncOpenAI, sim_url: str) -> None:
    stream = await oai.responses.create(model="b~bodyerr", input="hi", stream=True)
    events = [event async for event in stream]
    assert [e.type for e in events] == ["response.created", "response.in_progress", "response.failed"]
    failed = events[-1]
    assert failed.type == "response.failed" and failed.response.status == "failed"
    assert failed.response.error is not None and failed.response.error.code == "server_error"
    result = await oai.responses.create(model="b~bodyerr429", input="hi")
    assert result.status == "failed" and result.error is not None and result.error.code == "rate_limit_exceeded"


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"input": 3}, "input"),
        ({"input": [1]}, "input[0]"),
        ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
        ({"input": "x", "text": {"format": {"type": "yaml"}}}, "text.format.type"),
    ],
    ids=["bad-input", "bad-item", "zero-max-output", "bad-format"],
)
async def test_invalid_requests_are_400_naming_the_param(sim_url: str, fields: dict[str, Any], param: str) -> None:
    async with httpx.AsyncClient(base_url=sim_url, headers={"Authorization": "Bearer x"}) as http:
        resp = await http.post("/v1/responses", json={"model": "m", **fields})
    assert resp.status_code == 400 and resp.json()["error"]["param"] == param
