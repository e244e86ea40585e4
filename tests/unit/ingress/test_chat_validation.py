"""The ingress refuses a chat body whose fields are the wrong type or out of range (400 naming the field)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from turnout.errors import RequestRejected
from turnout_ingress.serving.validation import parse_chat_request

BASE: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def body(**extra: Any) -> bytes:
    return json.dumps({**BASE, **extra}).encode()


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"temperature": "hot"}, "temperature"),
        ({"temperature": -5}, "temperature"),
        ({"temperature": 2.5}, "temperature"),
        ({"top_p": 1.5}, "top_p"),
        ({"presence_penalty": -3}, "presence_penalty"),
        ({"n": 10**12}, "n"),
        ({"n": 0}, "n"),
        ({"n": 129}, "n"),
        ({"max_tokens": 10**30}, "max_tokens"),
        ({"max_completion_tokens": 2**31}, "max_completion_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"tools": "x"}, "tools"),
        ({"stream_options": "yes"}, "stream_options"),
        ({"stop": 5}, "stop"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"messages": [{"role": "user"}]}, "messages[0].content"),
        ({"messages": [{"role": "tool", "content": None, "tool_call_id": "c"}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": [{"text": "no type"}]}]}, "messages[0].content[0]"),
        ({"messages": [{"role": "user", "content": ["hi"]}]}, "messages[0].content[0]"),
        ({"logit_bias": "x"}, "logit_bias"),
        ({"response_format": {"type": "nope"}}, "response_format.type"),
        ({"tools": [{"type": "function"}]}, "tools[0].function.name"),
        ({"tools": [{"type": "function", "function": {"name": "f g"}}]}, "tools[0].function.name"),
        ({"tools": [{"type": "function", "function": {"name": "f" * 65}}]}, "tools[0].function.name"),
        ({"tools": [{"type": "function", "function": {"name": "é"}}]}, "tools[0].function.name"),
        ({"tools": ["f"]}, "tools[0]"),
        ({"tool_choice": 5}, "tool_choice"),
        ({"tool_choice": "sometimes"}, "tool_choice"),
        ({"tool_choice": {"function": {"name": "f"}}}, "tool_choice"),
        ({"user": 5}, "user"),
        ({"stream_options": {"include_usage": "yes"}}, "stream_options.include_usage"),
        ({"parallel_tool_calls": "true"}, "parallel_tool_calls"),
        ({"logprobs": 1}, "logprobs"),
        ({"seed": "x"}, "seed"),
        ({"seed": True}, "seed"),
        ({"seed": 1.5}, "seed"),
        ({"seed": 2**63}, "seed"),
        ({"logit_bias": {"x": 1000}}, "logit_bias"),
        ({"logit_bias": {"x": 1}}, "logit_bias"),
        ({"logit_bias": {"-1": 1}}, "logit_bias"),
        ({"logit_bias": {"\u0661": 1}}, "logit_bias"),
        ({"logit_bias": {"50256": 1000}}, "logit_bias.50256"),
        ({"logit_bias": {"50256": -100.5}}, "logit_bias.50256"),
        ({"logit_bias": {"50256": "1"}}, "logit_bias.50256"),
        ({"logit_bias": {"50256": True}}, "logit_bias.50256"),
        ({"stop": [str(i) for i in range(10)]}, "stop"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"stop": ["a", 5]}, "stop[1]"),
        ({"stop": [None]}, "stop[0]"),
        ({"tools": [{"type": "zzz", "function": {"name": "f"}}]}, "tools[0].type"),
        ({"tools": [{"type": "function", "function": {"name": "f"}}, {"type": "web_search"}]}, "tools[1].type"),
    ],
)
def test_a_wrong_field_is_refused_naming_it(extra: dict[str, Any], param: str) -> None:
    with pytest.raises(RequestRejected) as info:
        parse_chat_request(body(**extra))
    assert (info.value.status_code, info.value.param) == (400, param)


@pytest.mark.parametrize(
    "extra",
    [
        {"temperature": 0},
        {"temperature": 2},
        {"top_p": 0.5},
        {"n": 128},
        {"max_tokens": 2**31 - 1},
        {"tools": []},
        {"stream_options": {"include_usage": True}},
        {"stop": ["\n"]},
        {"stop": "END"},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
        {"messages": [{"role": "assistant", "content": None, "tool_calls": []}]},
        {"messages": [{"role": "assistant", "tool_calls": []}]},
        {"logit_bias": {"50256": -100}},
        {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}},
        {"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]},
        {"tools": [{"type": "function", "function": {"name": "get_Weather-2" + "x" * 51}}]},
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}]},
        {"tool_choice": "required"},
        {"tool_choice": {"type": "function", "function": {"name": "f"}}},
        {"user": "user-1234"},
        {"stream_options": {"include_usage": False}},
        {"stream_options": {}},
        {"parallel_tool_calls": False, "logprobs": True, "store": False},
        {"seed": 42},
        {"seed": -(2**63)},
        {"seed": 2**63 - 1},
        {"seed": None},
        {"logit_bias": None},
        {"logit_bias": {}},
        {"logit_bias": {"50256": 100, "0": -100, "12": 0.5}},
        {"stop": None},
        {"stop": []},
        {"stop": ["a", "b", "c", "d"]},
        {"tools": [{"type": "custom", "custom": {"name": "grammar"}}]},
        {"tools": [{"type": "custom"}]},
        {"frobnicate": {"any": ["shape"]}, "reasoning_effort": "low"},
    ],
)
def test_valid_fields_pass(extra: dict[str, Any]) -> None:
    assert parse_chat_request(body(**extra))["model"] == "m"


def test_an_over_long_model_is_refused_without_echoing_it() -> None:
    with pytest.raises(RequestRejected) as info:
        parse_chat_request(body(model="m" * 10_000))
    assert (info.value.status_code, info.value.param) == (400, "model")
    assert "m" * 300 not in str(info.value) and "10000" in str(info.value)
    assert parse_chat_request(body(model="m" * 256))["model"] == "m" * 256


@pytest.mark.parametrize(
    ("message", "said"),
    [
        ({"content": "hi"}, "`messages[0].role` is required: one of assistant, "),
        ({"role": "bot", "content": "hi"}, '(got "bot")'),
        ({"role": 7, "content": "hi"}, "(got 7)"),
    ],
)
def test_a_missing_role_is_called_missing_and_a_wrong_one_is_quoted(message: dict[str, Any], said: str) -> None:
    with pytest.raises(RequestRejected) as info:
        parse_chat_request(body(messages=[message]))
    assert info.value.param == "messages[0].role" and said in info.value.message


def test_a_wrong_tool_choice_lists_the_modes_and_quotes_what_came() -> None:
    with pytest.raises(RequestRejected) as info:
        parse_chat_request(body(tool_choice="sometimes"))
    assert '`tool_choice` must be one of auto, none, required, or an object naming a tool (got "sometimes").' == str(
        info.value.message
    )


def test_unknown_fields_reach_the_provider_untouched() -> None:
    """Forward compatibility: a field the gateway does not know is neither refused nor dropped."""
    assert parse_chat_request(body(frobnicate=[1, "x"]))["frobnicate"] == [1, "x"]


def test_a_wrong_tool_type_lists_the_types_and_quotes_what_came() -> None:
    with pytest.raises(RequestRejected) as info:
        parse_chat_request(body(tools=[{"type": "zzz", "function": {"name": "f"}}]))
    assert info.value.message == '`tools[0].type` must be one of custom, function (got "zzz").'


def test_too_many_stop_sequences_says_the_limit_and_the_count() -> None:
    with pytest.raises(RequestRejected) as info:
        parse_chat_request(body(stop=["s"] * 10))
    assert info.value.message == "`stop` must hold at most 4 sequences (got 10)."


def test_a_long_logit_bias_key_is_not_echoed_whole() -> None:
    with pytest.raises(RequestRejected) as info:
        parse_chat_request(body(logit_bias={"x" * 10_000: 1}))
    assert info.value.param == "logit_bias" and "x" * 100 not in info.value.message
