"""Anthropic-format clients: translation tables, errors, and round trips through both directions."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from turnout.adapters.anthropic_events import DONE, ChunkTranslator
from turnout.adapters.anthropic_wire import to_anthropic_request, to_openai_completion
from turnout.adapters.chat_parts import WireError
from turnout_ingress.surfaces.messages.events import EventTranslator, anthropic_stream
from turnout_ingress.surfaces.messages.wire import (
    error_type_for,
    from_openai_error,
    parse_messages_request,
    to_anthropic_message,
    to_openai_request,
)

USER = {"role": "user", "content": "hi"}


def _body(**fields: Any) -> dict[str, Any]:
    return {"model": "claude-x", "max_tokens": 64, "messages": [USER], **fields}


# ------------------------------------------------------------------ checks


@pytest.mark.parametrize(
    ("raw", "param"),
    [
        (b"", "body"),
        (b"{nope", "body"),
        (b"[]", "body"),
        (json.dumps({"max_tokens": 5, "messages": [USER]}).encode(), "model"),
        (json.dumps({"model": "m", "messages": [USER]}).encode(), "max_tokens"),
        (json.dumps({"model": "m", "max_tokens": 0, "messages": [USER]}).encode(), "max_tokens"),
        (json.dumps({"model": "m", "max_tokens": 5, "messages": []}).encode(), "messages"),
        (
            json.dumps({"model": "m", "max_tokens": 5, "messages": [{"role": "tool", "content": "x"}]}).encode(),
            "messages.0.role",
        ),
        (
            json.dumps({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": 3}]}).encode(),
            "messages.0.content",
        ),
        (json.dumps(_body(stream="yes")).encode(), "stream"),
    ],
    ids=[
        "empty",
        "not_json",
        "not_object",
        "no_model",
        "no_max_tokens",
        "zero_max_tokens",
        "no_messages",
        "system_role",
        "numeric_content",
        "stream_not_bool",
    ],
)
def test_bad_messages_request_is_refused_naming_the_field(raw: bytes, param: str) -> None:
    with pytest.raises(WireError) as caught:
        parse_messages_request(raw)
    assert caught.value.param == param
    assert caught.value.message.startswith(f"{param}: ")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"model": None}, "model: Field required (a non-empty string)"),
        ({"model": 5}, "model: Input should be a non-empty string"),
        ({"max_tokens": None}, "max_tokens: Field required (a positive integer)"),
        ({"max_tokens": "64"}, "max_tokens: Input should be a positive integer"),
        ({"messages": {}}, "messages: Input should be a non-empty array"),
        ({"model": "m" * 10_000}, "model: must be at most 256 characters (got 10000)"),
        ({"temperature": 7}, "temperature: Input should be a number from 0 to 1"),
        ({"top_p": True}, "top_p: Input should be a number from 0 to 1"),
        ({"top_k": -1}, "top_k: Input should be a non-negative integer"),
        ({"max_tokens": 10**20}, "max_tokens: must be at most 2147483647 (got 100000000000000000000)"),
        ({"stop_sequences": True}, "stop_sequences: Input should be an array of strings"),
        ({"stop_sequences": -1}, "stop_sequences: Input should be an array of strings"),
        ({"stop_sequences": "END"}, "stop_sequences: Input should be an array of strings"),
        ({"stop_sequences": {"a": 1}}, "stop_sequences: Input should be an array of strings"),
        ({"stop_sequences": ["END", 1]}, "stop_sequences.1: Input should be a string"),
    ],
)
def test_a_missing_field_and_a_wrong_one_are_told_apart(fields: dict[str, Any], message: str) -> None:
    body = {k: v for k, v in _body(**fields).items() if v is not None}
    with pytest.raises(WireError) as caught:
        parse_messages_request(json.dumps(body).encode())
    assert caught.value.message == message


# ---------------------------------------------------------- request tables


REQUESTS = [
    ("plain", _body(), {"model": "claude-x", "messages": [USER], "max_tokens": 64}),
    (
        "system_blocks_and_options",
        _body(
            system=[{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}],
            stop_sequences=["END"],
            temperature=0.2,
            top_p=0.5,
            top_k=3,
            metadata={"user_id": "u"},
            stream=True,
        ),
        {
            "model": "claude-x",
            "messages": [{"role": "system", "content": "Be brief."}, USER],
            "max_tokens": 64,
            "temperature": 0.2,
            "top_p": 0.5,
            "stop": ["END"],
            "user": "u",
            "stream": True,
        },
    ),
    (
        "images",
        _body(
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "what?"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "AAAA"}},
                        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
                    ],
                }
            ]
        ),
        {
            "model": "claude-x",
            "max_tokens": 64,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "what?"},
                        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}},
                        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                    ],
                }
            ],
        },
    ),
    (
        "tools_any_no_parallel",
        _body(
            tools=[{"name": "f", "description": "d", "input_schema": {"type": "object"}}],
            tool_choice={"type": "any", "disable_parallel_tool_use": True},
        ),
        {
            "model": "claude-x",
            "messages": [USER],
            "max_tokens": 64,
            "tools": [
                {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "description": "d"}}
            ],
            "tool_choice": "required",
            "parallel_tool_calls": False,
        },
    ),
    (
        "system_role_message_in_place",
        _body(
            system="top",
            messages=[
                USER,
                {"role": "system", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                {"role": "assistant", "content": "ok"},
                {"role": "system", "content": "late"},
            ],
        ),
        {
            "model": "claude-x",
            "messages": [
                {"role": "system", "content": "top"},
                USER,
                {"role": "system", "content": "ab"},
                {"role": "assistant", "content": "ok"},
                {"role": "system", "content": "late"},
            ],
            "max_tokens": 64,
        },
    ),
    (
        "tool_named",
        _body(tool_choice={"type": "tool", "name": "f"}),
        {
            "model": "claude-x",
            "messages": [USER],
            "max_tokens": 64,
            "tool_choice": {"type": "function", "function": {"name": "f"}},
        },
    ),
]


@pytest.mark.parametrize(("anthropic", "openai"), [r[1:] for r in REQUESTS], ids=[r[0] for r in REQUESTS])
def test_messages_request_translates_to_chat_request(anthropic: dict[str, Any], openai: dict[str, Any]) -> None:
    assert to_openai_request(anthropic) == openai


@pytest.mark.parametrize(
    "block",
    [
        {"type": "document", "source": {"type": "text", "data": "x"}},
        {"type": "image", "source": {"type": "file", "file_id": "f1"}},
        {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "image", "source": {}}]},
    ],
    ids=["document", "file_image", "tool_result_image"],
)
def test_unsupported_blocks_are_refused(block: dict[str, Any]) -> None:
    with pytest.raises(WireError):
        to_openai_request(_body(messages=[{"role": "user", "content": [block]}]))


@pytest.mark.parametrize(
    "tool",
    [
        {"type": "zzz", "name": "f", "input_schema": {}},
        {"type": "web_search_20250305", "name": "web_search"},
        {"name": "f"},
    ],
    ids=["unknown-type", "server-tool", "no-input-schema"],
)
def test_a_tool_other_than_a_client_tool_is_refused_naming_it(tool: dict[str, Any]) -> None:
    with pytest.raises(WireError) as caught:
        to_openai_request(_body(tools=[{"name": "ok", "input_schema": {}}, tool]))
    assert caught.value.param == "tools.1"


@pytest.mark.parametrize(
    ("fields", "param", "message"),
    [
        ({"tools": {"name": "f"}}, "tools", "must be an array"),
        ({"tools": [5]}, "tools.0", "must be an object"),
        ({"tools": [{"name": "bad name!", "input_schema": {}}]}, "tools.0.name", "must be 1 to 64 letters"),
        ({"tools": [{"name": "f" * 65, "input_schema": {}}]}, "tools.0.name", "must be 1 to 64 letters"),
        ({"tools": [{"type": "custom", "input_schema": {}}]}, "tools.0.name", "must be 1 to 64 letters"),
        ({"tools": [{"name": "f", "input_schema": 5}]}, "tools.0.input_schema", "must be an object (a JSON Schema)"),
        ({"metadata": 5}, "metadata", "an object"),
        ({"metadata": {"user_id": 7}}, "metadata.user_id", "Input should be a string"),
        ({"thinking": 5}, "thinking", "must be an object with a string `type`"),
        ({"thinking": {"budget_tokens": 2048}}, "thinking", "must be an object with a string `type`"),
    ],
    ids=[
        "tools-object",
        "tool-number",
        "tool-name-space",
        "tool-name-65",
        "tool-without-name",
        "input-schema-number",
        "metadata-number",
        "user-id-number",
        "thinking-number",
        "thinking-without-type",
    ],
)
def test_tools_metadata_and_thinking_of_the_wrong_shape_are_refused_naming_the_field(
    fields: dict[str, Any], param: str, message: str
) -> None:
    with pytest.raises(WireError) as caught:
        parse_messages_request(json.dumps(_body(**fields)).encode())
    assert caught.value.param == param and message in caught.value.message


def test_tools_metadata_and_thinking_of_the_right_shape_pass() -> None:
    body = _body(
        tools=[{"name": "get_weather-2", "input_schema": {"type": "object"}}, {"type": "web_search_20250305"}],
        metadata={"user_id": "u-1"},
        thinking={"type": "enabled", "budget_tokens": 2048},
    )
    assert parse_messages_request(json.dumps(body).encode())["metadata"] == {"user_id": "u-1"}


def test_a_tool_choice_that_is_not_an_object_says_what_it_must_be() -> None:
    with pytest.raises(WireError) as caught:
        to_openai_request(_body(tool_choice="auto"))
    assert caught.value.message == "tool_choice: must be an object whose `type` is auto, any, tool or none"


def test_a_custom_or_untyped_client_tool_is_carried_as_a_function() -> None:
    tools = [{"name": "a", "input_schema": {}}, {"type": "custom", "name": "b", "input_schema": {}}]
    assert [t["type"] for t in to_openai_request(_body(tools=tools))["tools"]] == ["function", "function"]


@pytest.mark.parametrize(
    ("role", "content", "message"),
    [
        ("user", [{"type": "text"}], "messages.0.content.0.text: Field required (a string)"),
        ("user", [{"type": "text", "text": 5}], "messages.0.content.0.text: Input should be a string"),
        ("assistant", [{"type": "text", "text": None}], "messages.0.content.0.text: Field required (a string)"),
        (
            "user",
            [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": ["x"]}]}],
            "messages.0.content.0.content.0.text: Input should be a string",
        ),
    ],
    ids=["user-missing", "user-number", "assistant-null", "tool-result-list"],
)
def test_a_text_block_needs_its_text_as_a_string(role: str, content: list[Any], message: str) -> None:
    with pytest.raises(WireError) as caught:
        to_openai_request(_body(messages=[{"role": role, "content": content}]))
    assert caught.value.message == message


@pytest.mark.parametrize(
    ("role", "block", "message"),
    [
        ("user", 1, "messages.0.content.0: each content block must be an object with a string `type`, got `1`"),
        (
            "assistant",
            {"text": "x"},
            (
                "messages.0.content.0: each content block must be an object with a string `type`, "
                "got an object without a string `type`"
            ),
        ),
        (
            "user",
            {"type": "audio"},
            "messages.0.content.0: content block type 'audio' is not supported by this gateway",
        ),
    ],
    ids=["a-number", "no-type", "unknown-type"],
)
def test_a_content_block_that_is_not_one_says_what_it_got(role: str, block: Any, message: str) -> None:
    with pytest.raises(WireError) as caught:
        to_openai_request(_body(messages=[{"role": role, "content": [block]}]))
    assert caught.value.message == message


@pytest.mark.parametrize(
    ("role", "block", "message"),
    [
        ("user", {"type": "tool_result", "content": "ok"}, "messages.0.content.0.tool_use_id: Field required"),
        ("user", {"type": "tool_result", "tool_use_id": 7}, "messages.0.content.0.tool_use_id: Input should be"),
        ("assistant", {"type": "tool_use", "name": "f", "input": {}}, "messages.0.content.0.id: Field required"),
        ("assistant", {"type": "tool_use", "id": "t1", "name": "", "input": {}}, "messages.0.content.0.name: Input"),
    ],
    ids=["result-without-id", "result-numeric-id", "use-without-id", "use-empty-name"],
)
def test_a_tool_block_needs_its_ids_and_name_as_strings(role: str, block: dict[str, Any], message: str) -> None:
    with pytest.raises(WireError) as caught:
        to_openai_request(_body(messages=[{"role": role, "content": [block]}]))
    assert caught.value.message.startswith(message)


def test_a_system_text_block_needs_its_text_too() -> None:
    with pytest.raises(WireError) as caught:
        to_openai_request(_body(system=[{"type": "text"}]))
    assert caught.value.message == "system.0.text: Field required (a string)"


# ------------------------------------------------------------ round trips

TOOL_CONVERSATION_OPENAI: dict[str, Any] = {
    "model": "claude-x",
    "max_tokens": 64,
    "messages": [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Weather in Oslo and Rome?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {"id": "toolu_1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Oslo"}'}},
                {"id": "toolu_2", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Rome"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": "cold"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "warm"},
        {"role": "user", "content": "Thanks"},
        {"role": "assistant", "content": "You are"},
    ],
    "tools": [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}],
    "tool_choice": {"type": "function", "function": {"name": "weather"}},
    "stop": ["END"],
    "temperature": 0.5,
    "stream": True,
}


def test_openai_request_round_trips_through_anthropic() -> None:
    anthropic = to_anthropic_request(TOOL_CONVERSATION_OPENAI, "claude-x")
    assert to_openai_request(anthropic) == TOOL_CONVERSATION_OPENAI


def test_anthropic_request_round_trips_through_openai() -> None:
    anthropic = to_anthropic_request(TOOL_CONVERSATION_OPENAI, "claude-x")
    assert to_anthropic_request(to_openai_request(anthropic), "claude-x") == anthropic


MESSAGES = [
    (
        "text_with_cache",
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [{"type": "text", "text": "Hi"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": 3,
                "output_tokens": 2,
                "cache_creation_input_tokens": 40,
                "cache_read_input_tokens": 500,
            },
        },
    ),
    (
        "tool_use",
        {
            "id": "msg_2",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_9", "name": "weather", "input": {"city": "Oslo", "days": 2}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {
                "input_tokens": 30,
                "output_tokens": 12,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        },
    ),
    (
        "max_tokens",
        {
            "id": "msg_3",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [{"type": "text", "text": "tok0"}],
            "stop_reason": "max_tokens",
            "stop_sequence": None,
            "usage": {
                "input_tokens": 1,
                "output_tokens": 1,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        },
    ),
]


@pytest.mark.parametrize("message", [m[1] for m in MESSAGES], ids=[m[0] for m in MESSAGES])
def test_anthropic_message_round_trips_through_chat_completion(message: dict[str, Any]) -> None:
    assert to_anthropic_message(to_openai_completion(message, created_s=1)) == message


def test_openai_completion_with_refusal_and_content_filter() -> None:
    completion = {
        "id": "chatcmpl-1",
        "model": "gpt-x",
        "choices": [
            {
                "index": 0,
                "finish_reason": "content_filter",
                "message": {"role": "assistant", "content": None, "refusal": "I can't help with that."},
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11},
    }
    message = to_anthropic_message(completion)
    assert message["id"] == "msg_chatcmpl-1"
    assert message["content"] == [{"type": "text", "text": "I can't help with that."}]
    assert message["stop_reason"] == "refusal"
    assert message["usage"] == {
        "input_tokens": 5,
        "output_tokens": 6,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


STREAMS: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = [
    (
        "text",
        [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_1",
                        "type": "message",
                        "role": "assistant",
                        "model": "claude-x",
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 0, "output_tokens": 0},
                    },
                },
            ),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {
                        "input_tokens": 9,
                        "output_tokens": 2,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 4,
                    },
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ],
    ),
    (
        "text_then_tools",
        [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_2",
                        "type": "message",
                        "role": "assistant",
                        "model": "claude-x",
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 0, "output_tokens": 0},
                    },
                },
            ),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "On it."}},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 1,
                    "content_block": {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 1,
                    "delta": {"type": "input_json_delta", "partial_json": '{"city":'},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 1,
                    "delta": {"type": "input_json_delta", "partial_json": '"Oslo"}'},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 1}),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 2,
                    "content_block": {"type": "tool_use", "id": "toolu_2", "name": "time", "input": {}},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 2,
                    "delta": {"type": "input_json_delta", "partial_json": "{}"},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 2}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                    "usage": {
                        "input_tokens": 20,
                        "output_tokens": 15,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                    },
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ],
    ),
]


@pytest.mark.parametrize("events", [s[1] for s in STREAMS], ids=[s[0] for s in STREAMS])
def test_anthropic_event_stream_round_trips_through_openai_chunks(events: list[tuple[str, dict[str, Any]]]) -> None:
    upstream = ChunkTranslator(created_s=0)
    client = EventTranslator(model="requested")
    out: list[tuple[str, dict[str, Any]]] = []
    for name, data in events:
        chunks = upstream.feed(name, data)
        if chunks == DONE:
            out += client.done()
            break
        for chunk in chunks:
            out += client.feed(json.loads(json.dumps(chunk)))
    assert out == events


def test_event_translator_ends_a_broken_stream_with_an_error_event() -> None:
    client = EventTranslator(model="m")
    client.feed({"id": "x", "model": "m", "choices": [{"index": 0, "delta": {"content": "a"}}]})
    assert client.error("the upstream stream stalled", "stream_stalled") == [
        ("error", {"type": "error", "error": {"type": "timeout_error", "message": "the upstream stream stalled"}})
    ]


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    ("status", "etype"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (402, "billing_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (409, "invalid_request_error"),
        (413, "request_too_large"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (502, "api_error"),
        (503, "overloaded_error"),
        (504, "timeout_error"),
        (529, "overloaded_error"),
        (501, "api_error"),
    ],
)
def test_error_type_follows_status(status: int, etype: str) -> None:
    assert error_type_for(status) == etype


def test_gateway_502_keeps_message_code_and_attempt_summary() -> None:
    attempts = [{"target": "claude/c", "status": 529, "class": "retry_then_fallback", "duration_ms": 3.0}]
    openai = json.dumps(
        {
            "error": {
                "message": "No provider could serve",
                "type": "upstream_error",
                "param": None,
                "code": "provider_failed",
                "attempts": attempts,
            }
        }
    ).encode()
    body = json.loads(from_openai_error(502, openai, "rid"))
    assert body == {
        "type": "error",
        "request_id": "rid",
        "error": {
            "type": "api_error",
            "message": "No provider could serve",
            "code": "provider_failed",
            "attempts": attempts,
        },
    }


# ------------------------------------------------------ relay frames -> SSE


async def _frames(*frames: bytes) -> AsyncIterator[bytes]:
    for f in frames:
        yield f


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    data = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "gpt-x",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def _parse(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for block in raw.decode().strip().split("\n\n"):
        name, data = block.split("\n")
        events.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return events


async def test_relay_frames_become_anthropic_events_and_the_relay_runs_to_its_end() -> None:
    finished: list[bool] = []

    async def relay() -> AsyncIterator[bytes]:
        yield _chunk({"role": "assistant", "content": ""})
        yield _chunk({"content": "tok0"}) + _chunk({"content": " tok1"})
        yield _chunk({}, "stop")
        yield b"data: [DONE]\n\n"
        finished.append(True)

    raw = b"".join([piece async for piece in anthropic_stream(relay(), model="m")])
    events = _parse(raw)
    assert [n for n, _ in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[0][1]["message"]["id"] == "msg_chatcmpl-1" and events[0][1]["message"]["model"] == "gpt-x"
    assert "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta") == "tok0 tok1"
    assert finished == [True]


async def test_relay_error_frame_becomes_an_error_event_without_message_stop() -> None:
    error = b'data: {"error": {"message": "the upstream provider failed mid-stream", "code": "upstream_error"}}\n\n'
    raw = b"".join([p async for p in anthropic_stream(_frames(_chunk({"content": "a"}), error), model="m")])
    events = _parse(raw)
    assert events[-1] == (
        "error",
        {"type": "error", "error": {"type": "api_error", "message": "the upstream provider failed mid-stream"}},
    )
    assert "message_stop" not in [n for n, _ in events]


async def test_the_frames_of_one_relay_write_become_one_write_of_anthropic_events() -> None:
    first = _chunk({"role": "assistant", "content": ""}) + _chunk({"content": "tok0"}) + _chunk({"content": " tok1"})
    split = _chunk({}, "stop")
    pieces = [
        piece
        async for piece in anthropic_stream(_frames(first, split[:20], split[20:] + b"data: [DONE]\n\n"), model="m")
    ]
    assert len(pieces) == 2  # a piece holding no whole frame gives no write
    assert [n for n, _ in _parse(pieces[0])] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
    ]
    assert [n for n, _ in _parse(pieces[1])] == ["content_block_stop", "message_delta", "message_stop"]
