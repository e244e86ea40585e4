"""Tool calls and logprobs in chat answers, seen through the official `openai` and `anthropic` SDKs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import openai
import pytest
from openai.types.chat import ChatCompletionMessageFunctionToolCall

from turnout_sim import tool_calls

WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer"},
        "ratio": {"type": "number"},
        "metric": {"type": "boolean"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "extra": {"type": "object"},
    },
    "required": ["city", "unit"],
}
WEATHER_ARGS = {
    "city": "sim",
    "days": 1,
    "ratio": 1.5,
    "metric": True,
    "unit": "celsius",
    "tags": [],
    "extra": {},
}
OPENAI_TOOLS: Any = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_SCHEMA}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
]
USER: Any = [{"role": "user", "content": "weather in Paris?"}]


@pytest.fixture
async def oai(sim_url: str) -> AsyncIterator[openai.AsyncOpenAI]:
    client = openai.AsyncOpenAI(base_url=f"{sim_url}/v1", api_key="x", max_retries=0, timeout=5.0)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def claude(sim_url: str) -> AsyncIterator[anthropic.AsyncAnthropic]:
    client = anthropic.AsyncAnthropic(base_url=sim_url, api_key="sk-ant-x", max_retries=0, timeout=5.0)
    try:
        yield client
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (WEATHER_SCHEMA, WEATHER_ARGS),
        ({"type": "object", "properties": {"n": {"type": ["null", "integer"]}}}, {"n": 1}),
        (
            {"type": "object", "properties": {"k": {"const": "x"}}, "required": ["k", "other"]},
            {"k": "x", "other": "sim"},
        ),
        (
            {"type": "object", "properties": {"o": {"type": "object", "properties": {"b": {"type": "boolean"}}}}},
            {"o": {"b": True}},
        ),
        ({"type": "object"}, None),
        ("not a schema", None),
    ],
    ids=["every-type", "nullable", "const-and-required", "nested", "free-form", "junk"],
)
def test_arguments_come_from_the_schema_properties(schema: object, expected: dict[str, Any] | None) -> None:
    assert tool_calls.object_for(schema) == expected


def test_fragments_join_back_and_are_several() -> None:
    text = json.dumps(WEATHER_ARGS)
    parts = tool_calls.fragments(text)
    assert "".join(parts) == text and len(parts) == tool_calls.ARGUMENT_FRAGMENTS
    assert tool_calls.fragments("") == []


async def test_openai_sdk_tool_call_uses_the_first_tool(oai: openai.AsyncOpenAI) -> None:
    result = await oai.chat.completions.create(
        model="gpt-4o", messages=USER, tools=OPENAI_TOOLS, parallel_tool_calls=False
    )
    choice = result.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls or []
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert call.id.startswith("call_") and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == WEATHER_ARGS


async def test_openai_sdk_tool_choice_names_the_tool_or_none(oai: openai.AsyncOpenAI) -> None:
    named = await oai.chat.completions.create(
        model="gpt-4o",
        messages=USER,
        tools=OPENAI_TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
    )
    [call] = named.choices[0].message.tool_calls or []
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert call.function.name == "get_time"
    assert json.loads(call.function.arguments) == {
        "answer": "tok0 tok1 tok2 tok3 tok4 tok5 tok6 tok7 tok8 tok9 tok10 tok11"
    }
    plain = await oai.chat.completions.create(model="gpt-4o", messages=USER, tools=OPENAI_TOOLS, tool_choice="none")
    assert plain.choices[0].message.tool_calls is None and plain.choices[0].finish_reason == "stop"
    assert plain.choices[0].message.content == " ".join(f"tok{i}" for i in range(12))


async def test_openai_sdk_streamed_tool_call_assembles_its_arguments(oai: openai.AsyncOpenAI) -> None:
    stream = await oai.chat.completions.create(model="gpt-4o", messages=USER, tools=OPENAI_TOOLS, stream=True)
    name, call_id, fragments, finish = None, None, [], None
    async for chunk in stream:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                assert delta.index == 0
                call_id = delta.id or call_id
                if delta.function is not None:
                    name = delta.function.name or name
                    fragments.append(delta.function.arguments or "")
            finish = choice.finish_reason or finish
    assert name == "get_weather" and call_id is not None and call_id.startswith("call_")
    assert len([f for f in fragments if f]) > 1
    assert json.loads("".join(fragments)) == WEATHER_ARGS
    assert finish == "tool_calls"


async def test_openai_sdk_round_trip_quotes_the_tool_result(oai: openai.AsyncOpenAI) -> None:
    first = await oai.chat.completions.create(model="gpt-4o", messages=USER, tools=OPENAI_TOOLS)
    message = first.choices[0].message
    [call] = message.tool_calls or []
    messages: Any = [
        *USER,
        message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "22C and sunny"},
    ]
    second = await oai.chat.completions.create(model="gpt-4o", messages=messages, tools=OPENAI_TOOLS)
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "Tool result: 22C and sunny"
    assert second.usage is not None and second.usage.completion_tokens == 5
    streamed = await oai.chat.completions.create(model="gpt-4o", messages=messages, tools=OPENAI_TOOLS, stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in streamed if c.choices])
    assert text == "Tool result: 22C and sunny"


async def test_openai_sdk_tool_call_under_a_fault_scenario(oai: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.RateLimitError):
        await oai.chat.completions.create(model="t~429ra1,200", messages=USER, tools=OPENAI_TOOLS)
    result = await oai.chat.completions.create(model="t~429ra1,200", messages=USER, tools=OPENAI_TOOLS)
    assert result.choices[0].finish_reason == "tool_calls"
    with pytest.raises(openai.APIConnectionError):
        stream = await oai.chat.completions.create(model="t~cut2", messages=USER, tools=OPENAI_TOOLS, stream=True)
        async for _ in stream:
            pass


async def test_openai_sdk_logprobs(oai: openai.AsyncOpenAI) -> None:
    result = await oai.chat.completions.create(
        model="gpt-4o", messages=USER, max_tokens=3, logprobs=True, top_logprobs=2
    )
    logprobs = result.choices[0].logprobs
    assert logprobs is not None and logprobs.content is not None
    assert [t.token for t in logprobs.content] == ["tok0", " tok1", " tok2"]
    assert [t.logprob for t in logprobs.content] == [-0.1, -0.2, -0.3]
    assert logprobs.content[1].bytes == list(b" tok1")
    assert [(a.token, a.logprob) for a in logprobs.content[0].top_logprobs] == [("tok0", -0.1), ("alt1", -1.1)]
    stream = await oai.chat.completions.create(
        model="gpt-4o", messages=USER, max_tokens=3, logprobs=True, top_logprobs=1, stream=True
    )
    tokens = []
    async for chunk in stream:
        for choice in chunk.choices:
            if choice.logprobs is not None and choice.logprobs.content:
                tokens += [(t.token, t.logprob, len(t.top_logprobs)) for t in choice.logprobs.content]
    assert tokens == [("tok0", -0.1, 1), (" tok1", -0.2, 1), (" tok2", -0.3, 1)]
    plain = await oai.chat.completions.create(model="gpt-4o", messages=USER, max_tokens=3)
    assert plain.choices[0].logprobs is None


async def test_top_logprobs_without_logprobs_is_a_400_naming_it(oai: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as bad:
        await oai.chat.completions.create(model="gpt-4o", messages=USER, top_logprobs=2)
    assert bad.value.param == "top_logprobs"


ANTHROPIC_TOOLS: Any = [
    {"name": "get_weather", "description": "weather", "input_schema": WEATHER_SCHEMA},
    {"name": "get_time", "description": "time", "input_schema": {"type": "object"}},
]


async def test_anthropic_sdk_create_answers_a_tool_use(claude: anthropic.AsyncAnthropic) -> None:
    message = await claude.messages.create(model="claude-x", max_tokens=50, messages=USER, tools=ANTHROPIC_TOOLS)
    assert message.stop_reason == "tool_use"
    [block] = message.content
    assert isinstance(block, anthropic.types.ToolUseBlock)
    assert block.id.startswith("toolu_") and block.name == "get_weather" and block.input == WEATHER_ARGS
    plain = await claude.messages.create(
        model="claude-x", max_tokens=3, messages=USER, tools=ANTHROPIC_TOOLS, tool_choice={"type": "none"}
    )
    assert plain.stop_reason == "end_turn" and plain.content[0].type == "text"


async def test_anthropic_sdk_stream_assembles_the_tool_input(claude: anthropic.AsyncAnthropic) -> None:
    async with claude.messages.stream(
        model="claude-x",
        max_tokens=50,
        messages=USER,
        tools=ANTHROPIC_TOOLS,
        tool_choice={"type": "tool", "name": "get_weather"},
    ) as stream:
        kinds = [event.type async for event in stream]
        final = await stream.get_final_message()
    assert kinds.count("input_json") > 1
    assert final.stop_reason == "tool_use"
    [block] = final.content
    assert isinstance(block, anthropic.types.ToolUseBlock)
    assert block.name == "get_weather" and block.input == WEATHER_ARGS


async def test_anthropic_sdk_round_trip_quotes_the_tool_result(claude: anthropic.AsyncAnthropic) -> None:
    first = await claude.messages.create(model="claude-x", max_tokens=50, messages=USER, tools=ANTHROPIC_TOOLS)
    [block] = first.content
    assert isinstance(block, anthropic.types.ToolUseBlock)
    messages: Any = [
        *USER,
        {"role": "assistant", "content": [block.model_dump()]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": block.id, "content": [{"type": "text", "text": "22C"}]}],
        },
    ]
    second = await claude.messages.create(model="claude-x", max_tokens=50, messages=messages, tools=ANTHROPIC_TOOLS)
    assert second.stop_reason == "end_turn"
    assert second.content[0].type == "text" and second.content[0].text == "Tool result: 22C"
