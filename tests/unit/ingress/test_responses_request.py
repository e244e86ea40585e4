"""Responses requests -> the canonical chat request (`turnout_ingress.surfaces.responses.request`): every
input form, tools, formats, the echo, and a 400 naming the field for each refusal."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnout.errors import RequestRejected
from turnout_ingress.surfaces.responses.request import translate_input, translate_request
from turnout_ingress.surfaces.responses.surface import RESPONSES

TOOL: Any = {"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"}, "strict": True}


def _call(**fields: Any) -> Any:
    return translate_request({"model": "m", "input": "hi", **fields})


def test_a_string_input_is_one_user_message() -> None:
    call = _call()
    assert call.chat == {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert call.input_items == [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
    assert call.store and call.previous_response_id is None


def test_instructions_lead_as_a_system_message_and_are_not_part_of_the_turn() -> None:
    call = _call(instructions="Be brief.")
    assert call.chat["messages"][0] == {"role": "system", "content": "Be brief."}
    assert call.turn == [{"role": "user", "content": "hi"}] and call.echo["instructions"] == "Be brief."


def test_items_of_every_kind_become_chat_messages_in_order() -> None:
    items: Any = [
        {"role": "developer", "content": "dev"},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "a"}, {"type": "input_image", "image_url": "https://x/i.png"}],
        },
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "calling"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "g", "arguments": '{"x":1}'},
        {"type": "function_call_output", "call_id": "c1", "output": "r1"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "r2"}]},
    ]
    messages, kept, _ = translate_input(items)
    assert messages == [
        {"role": "developer", "content": "dev"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "https://x/i.png"}}],
        },
        {
            "role": "assistant",
            "content": "calling",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "g", "arguments": '{"x":1}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "r1"},
        {"role": "tool", "tool_call_id": "c2", "content": "r2"},
    ]
    assert [i["type"] for i in kept] == [
        "message",
        "message",
        "message",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]


def test_a_function_call_without_an_assistant_message_before_it_is_its_own_turn() -> None:
    messages, _, _ = translate_input([{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}])
    assert messages == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        }
    ]


def test_fields_map_to_their_chat_counterparts() -> None:
    call = _call(
        tools=[TOOL],
        tool_choice={"type": "function", "name": "f"},
        text={"format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": True}},
        max_output_tokens=99,
        temperature=0.2,
        top_p=0.9,
        parallel_tool_calls=False,
        user="u1",
        reasoning={"effort": "high", "summary": "auto"},
        metadata={"k": "v"},
        store=False,
        stream=True,
        include=["reasoning.encrypted_content"],
        service_tier="auto",
        future_field=1,
    )
    assert call.chat == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [
            {
                "type": "function",
                "function": {"name": "f", "description": "d", "parameters": {"type": "object"}, "strict": True},
            }
        ],
        "tool_choice": {"type": "function", "function": {"name": "f"}},
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "out", "schema": {"type": "object"}, "strict": True},
        },
        "reasoning_effort": "high",
        "max_completion_tokens": 99,
        "temperature": 0.2,
        "top_p": 0.9,
        "parallel_tool_calls": False,
        "user": "u1",
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert not call.store
    assert call.echo["metadata"] == {"k": "v"} and call.echo["tools"] == [TOOL] and call.echo["max_output_tokens"] == 99
    assert call.echo["reasoning"] == {"effort": "high", "summary": "auto"} and call.echo["store"] is False


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [({"type": "text"}, None), ({"type": "json_object"}, {"type": "json_object"})],
    ids=["text", "json_object"],
)
def test_text_formats(fmt: dict[str, Any], expected: Any) -> None:
    assert _call(text={"format": fmt}).chat.get("response_format") == expected


def test_the_echo_has_openai_defaults() -> None:
    echo = _call().echo
    assert echo["tool_choice"] == "auto" and echo["parallel_tool_calls"] is True and echo["tools"] == []
    assert echo["text"] == {"format": {"type": "text"}} and echo["truncation"] == "disabled" and echo["store"] is True
    assert (echo["temperature"], echo["top_p"], echo["metadata"], echo["previous_response_id"]) == (1.0, 1.0, {}, None)


@pytest.mark.parametrize(
    ("fields", "param", "code"),
    [
        ({"input": None}, "input", "invalid_request"),
        ({"input": []}, "input", "invalid_request"),
        ({"input": [{"type": "reasoning"}]}, "input", "invalid_request"),
        ({"input": [1]}, "input[0]", "invalid_request"),
        ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role", "invalid_request"),
        ({"input": [{"role": "user", "content": 3}]}, "input[0].content", "invalid_request"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}]},
            "input[0].content[0].file_id",
            "invalid_request",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image"}]}]},
            "input[0].content[0].image_url",
            "invalid_request",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
            "input[0].content[0].type",
            "invalid_request",
        ),
        (
            {"input": [{"role": "assistant", "content": [{"type": "input_image", "image_url": "u"}]}]},
            "input[0].content[0].type",
            "invalid_request",
        ),
        ({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, "input[0].call_id", "invalid_request"),
        (
            {"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}]},
            "input[0].arguments",
            "invalid_request",
        ),
        (
            {"input": [{"type": "function_call_output", "call_id": "c", "output": 1}]},
            "input[0].output",
            "invalid_request",
        ),
        ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0].type", "invalid_request"),
        ({"input": [{"type": "web_search_call"}]}, "input[0].type", "invalid_request"),
        (
            {"tools": [TOOL, {"type": "web_search"}], "tool_choice": "required"},
            "tools[1].type",
            "unsupported_tool",
        ),
        (
            {"tools": [{"type": "mcp", "server_label": "x"}], "tool_choice": {"type": "function", "name": "f"}},
            "tools[0].type",
            "unsupported_tool",
        ),
        ({"tools": [{"type": "namespace", "name": "a b", "tools": []}]}, "tools[0].name", "invalid_request"),
        ({"tools": [TOOL, TOOL]}, "tools[1].name", "invalid_request"),
        (
            {
                "tools": [
                    {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "w"}]},
                    {"type": "function", "name": "ns__w"},
                ]
            },
            "tools[1].name",
            "invalid_request",
        ),
        ({"tools": [TOOL], "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice.name", "invalid_request"),
        ({"tool_choice": "required"}, "tool_choice", "invalid_request"),
        ({"tools": [], "tool_choice": "required"}, "tool_choice", "invalid_request"),
        ({"truncation": "sideways"}, "truncation", "invalid_request"),
        ({"truncation": 5}, "truncation", "invalid_request"),
        ({"reasoning": {"summary": 5}}, "reasoning.summary", "invalid_request"),
        ({"include": "all"}, "include", "invalid_request"),
        ({"max_tool_calls": -1}, "max_tool_calls", "invalid_request"),
        ({"top_logprobs": 100}, "top_logprobs", "invalid_request"),
        ({"service_tier": 5}, "service_tier", "invalid_request"),
        ({"text": {"verbosity": "loud"}}, "text.verbosity", "invalid_request"),
        ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata", "invalid_request"),
        (
            {"input": [{"type": "function_call", "call_id": "c", "name": "a b", "arguments": "{}"}]},
            "input[0].name",
            "invalid_request",
        ),
        ({"tools": [{"type": "namespace", "name": "ns", "tools": {}}]}, "tools[0].tools", "invalid_request"),
        (
            {"tools": [{"type": "namespace", "name": "n" * 60, "tools": [{"type": "function", "name": "long"}]}]},
            "tools[0].tools[0].name",
            "invalid_request",
        ),
        ({"tools": [{"type": "function", "name": "bad name"}]}, "tools[0].name", "invalid_request"),
        ({"tools": [{**TOOL, "parameters": []}]}, "tools[0].parameters", "invalid_request"),
        ({"tools": {}}, "tools", "invalid_request"),
        ({"tool_choice": "any"}, "tool_choice", "invalid_request"),
        ({"tool_choice": {"type": "function"}}, "tool_choice.name", "invalid_request"),
        ({"tool_choice": {"type": "file_search"}}, "tool_choice.type", "unsupported_tool"),
        ({"text": {"format": {"type": "yaml"}}}, "text.format.type", "invalid_request"),
        ({"text": {"format": {"type": "json_schema", "schema": {}}}}, "text.format.name", "invalid_request"),
        ({"text": {"format": {"type": "json_schema", "name": "n"}}}, "text.format.schema", "invalid_request"),
        ({"text": "json"}, "text", "invalid_request"),
        ({"max_output_tokens": 0}, "max_output_tokens", "invalid_request"),
        ({"max_output_tokens": True}, "max_output_tokens", "invalid_request"),
        ({"temperature": 3}, "temperature", "invalid_request"),
        ({"top_p": -1}, "top_p", "invalid_request"),
        ({"stream": "yes"}, "stream", "invalid_request"),
        ({"store": 1}, "store", "invalid_request"),
        ({"instructions": 5}, "instructions", "invalid_request"),
        ({"previous_response_id": 5}, "previous_response_id", "invalid_request"),
        ({"metadata": {"k": 1}}, "metadata", "invalid_request"),
        ({"reasoning": {"effort": "max"}}, "reasoning.effort", "invalid_request"),
        ({"prompt": {"id": "pmpt_1"}}, "prompt", "unsupported_parameter"),
        ({"conversation": "conv_1"}, "conversation", "unsupported_parameter"),
        ({"background": True}, "background", "unsupported_parameter"),
    ],
)
def test_refusals_name_the_field(fields: dict[str, Any], param: str, code: str) -> None:
    with pytest.raises(RequestRejected) as caught:
        _call(**fields)
    assert (caught.value.status_code, caught.value.param, caught.value.code) == (400, param, code)


def test_the_surface_takes_the_provider_object_out_and_leaves_the_job_body_to_prepare() -> None:
    raw = msgspec.json.encode({"model": "m", "input": "hi", "provider": {"only": ["sim-a"]}})
    inbound = RESPONSES.parse(raw, {})
    assert inbound.preferences.only == ("sim-a",) and "provider" not in inbound.body and inbound.job_body == b""


_TEXT = st.text(max_size=20)
_MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "developer"]), "content": _TEXT}
)


@given(st.lists(_MESSAGE, min_size=1, max_size=8))
def test_string_messages_keep_their_roles_texts_and_order(items: list[dict[str, Any]]) -> None:
    messages, kept, _ = translate_input(items)
    assert [(m["role"], m["content"]) for m in messages] == [(i["role"], i["content"]) for i in items]
    assert [k["content"][0]["text"] for k in kept] == [i["content"] for i in items]
