"""Tables for the OpenAI -> Anthropic request and Anthropic -> OpenAI response translation."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from turnout.adapters.anthropic_chat import outcome_of_message
from turnout.adapters.anthropic_wire import (
    DEFAULT_MAX_TOKENS,
    finish_reason,
    openai_usage,
    to_anthropic_request,
    to_openai_completion,
)
from turnout.adapters.chat_parts import WireError
from turnout.core.classify import classify
from turnout.core.types import FailureKind, TransportError

USER = {"role": "user", "content": "hi"}
NOW_S = 1_750_000_000.0
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def _req(**fields: Any) -> dict[str, Any]:
    return {"model": "gpt-x", "messages": [USER], **fields}


REQUESTS = [
    ("plain", _req(), {"model": "claude-x", "max_tokens": DEFAULT_MAX_TOKENS, "messages": [USER]}),
    ("max_tokens", _req(max_tokens=50), {"model": "claude-x", "max_tokens": 50, "messages": [USER]}),
    (
        "max_completion_tokens_wins",
        _req(max_tokens=50, max_completion_tokens=70),
        {"model": "claude-x", "max_tokens": 70, "messages": [USER]},
    ),
    (
        "system_and_developer_hoisted",
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": "Be brief."},
                USER,
                {"role": "developer", "content": [{"type": "text", "text": "No emoji."}]},
            ],
        },
        {"model": "claude-x", "max_tokens": DEFAULT_MAX_TOKENS, "messages": [USER], "system": "Be brief.\n\nNo emoji."},
    ),
    (
        "stop_string",
        _req(stop="END"),
        {"model": "claude-x", "max_tokens": DEFAULT_MAX_TOKENS, "messages": [USER], "stop_sequences": ["END"]},
    ),
    (
        "stop_list_temperature_clamped_top_p_user_stream",
        _req(
            stop=["a", "b"],
            temperature=1.7,
            top_p=0.9,
            user="u-1",
            stream=True,
            stream_options={"include_usage": True},
            seed=3,
            response_format={"type": "text"},
        ),
        {
            "model": "claude-x",
            "max_tokens": DEFAULT_MAX_TOKENS,
            "messages": [USER],
            "stop_sequences": ["a", "b"],
            "temperature": 1.0,
            "top_p": 0.9,
            "metadata": {"user_id": "u-1"},
            "stream": True,
        },
    ),
    (
        "tools_auto",
        _req(tools=[WEATHER_TOOL], tool_choice="auto"),
        {
            "model": "claude-x",
            "max_tokens": DEFAULT_MAX_TOKENS,
            "messages": [USER],
            "tools": [
                {
                    "name": "weather",
                    "description": "Weather of a city",
                    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
                }
            ],
            "tool_choice": {"type": "auto"},
        },
    ),
    (
        "tool_choice_none",
        _req(tool_choice="none"),
        {"model": "claude-x", "max_tokens": DEFAULT_MAX_TOKENS, "messages": [USER], "tool_choice": {"type": "none"}},
    ),
    (
        "tool_choice_required",
        _req(tool_choice="required"),
        {"model": "claude-x", "max_tokens": DEFAULT_MAX_TOKENS, "messages": [USER], "tool_choice": {"type": "any"}},
    ),
    (
        "tool_choice_named_no_parallel",
        _req(tool_choice={"type": "function", "function": {"name": "weather"}}, parallel_tool_calls=False),
        {
            "model": "claude-x",
            "max_tokens": DEFAULT_MAX_TOKENS,
            "messages": [USER],
            "tool_choice": {"type": "tool", "name": "weather", "disable_parallel_tool_use": True},
        },
    ),
    (
        "tool_round_trip_messages",
        {
            "model": "m",
            "messages": [
                USER,
                {
                    "role": "assistant",
                    "content": "Looking.",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "weather", "arguments": '{"city":"Oslo"}'},
                        },
                        {
                            "id": "call_2",
                            "type": "function",
                            "function": {"name": "weather", "arguments": '{"city":"Rome"}'},
                        },
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "cold"},
                {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "warm"}]},
                {"role": "user", "content": "and?"},
            ],
        },
        {
            "model": "claude-x",
            "max_tokens": DEFAULT_MAX_TOKENS,
            "messages": [
                USER,
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Looking."},
                        {"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Oslo"}},
                        {"type": "tool_use", "id": "call_2", "name": "weather", "input": {"city": "Rome"}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "call_1", "content": "cold"},
                        {"type": "tool_result", "tool_use_id": "call_2", "content": "warm"},
                        {"type": "text", "text": "and?"},
                    ],
                },
            ],
        },
    ),
    (
        "images",
        {
            "model": "m",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "what?"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg", "detail": "low"}},
                    ],
                }
            ],
        },
        {
            "model": "claude-x",
            "max_tokens": DEFAULT_MAX_TOKENS,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "what?"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                        },
                        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
                    ],
                }
            ],
        },
    ),
    (
        "assistant_prefill_kept_last",
        {"model": "m", "messages": [USER, {"role": "assistant", "content": "tok0 tok1"}]},
        {
            "model": "claude-x",
            "max_tokens": DEFAULT_MAX_TOKENS,
            "messages": [USER, {"role": "assistant", "content": "tok0 tok1"}],
        },
    ),
]


@pytest.mark.parametrize(("openai", "anthropic"), [r[1:] for r in REQUESTS], ids=[r[0] for r in REQUESTS])
def test_openai_request_translates_to_anthropic(openai: dict[str, Any], anthropic: dict[str, Any]) -> None:
    assert to_anthropic_request(openai, "claude-x") == anthropic


REFUSED = [
    ("n_above_1", _req(n=2), "n"),
    (
        "function_role",
        {"model": "m", "messages": [{"role": "function", "name": "f", "content": "x"}]},
        "messages[0].role",
    ),
    (
        "ftp_image",
        {
            "model": "m",
            "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://x/y.png"}}]}],
        },
        "messages[0].content[0].image_url.url",
    ),
    (
        "audio_part",
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]}
            ],
        },
        "messages[0].content[0]",
    ),
    (
        "bad_tool_arguments",
        {
            "model": "m",
            "messages": [
                USER,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{not json"}}
                    ],
                },
            ],
        },
        "messages[1].tool_calls[0].function.arguments",
    ),
    ("bad_tool_choice", _req(tool_choice="sometimes"), "tool_choice"),
    ("system_only", {"model": "m", "messages": [{"role": "system", "content": "be terse"}]}, "messages"),
    ("json_schema", _req(response_format={"type": "json_schema", "json_schema": {"name": "n"}}), "response_format"),
    ("json_object", _req(response_format={"type": "json_object"}), "response_format"),
]


@pytest.mark.parametrize(("openai", "param"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_untranslatable_request_is_refused_naming_the_field(openai: dict[str, Any], param: str) -> None:
    with pytest.raises(WireError) as caught:
        to_anthropic_request(openai, "claude-x")
    assert caught.value.param == param


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
        ("pause_turn", "stop"),
        (None, "stop"),
        ("something_new", "stop"),
    ],
)
def test_stop_reason_maps_to_finish_reason(stop_reason: str | None, finish: str) -> None:
    assert finish_reason(stop_reason) == finish


def test_usage_counts_cache_reads_and_writes_as_prompt_tokens() -> None:
    usage = openai_usage(
        {"input_tokens": 10, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 1000, "output_tokens": 7}
    )
    assert usage == {
        "prompt_tokens": 1110,
        "completion_tokens": 7,
        "total_tokens": 1117,
        "prompt_tokens_details": {"cached_tokens": 1000, "cache_creation_tokens": 100},
    }


def _message(content: list[dict[str, Any]], stop_reason: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 4},
    }


RESPONSES = [
    (
        "text",
        _message([{"type": "text", "text": "Hello"}, {"type": "text", "text": " there"}]),
        {"role": "assistant", "content": "Hello there", "refusal": None},
        "stop",
    ),
    (
        "tool_only",
        _message([{"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}}], "tool_use"),
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [
                {"id": "toolu_1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Oslo"}'}}
            ],
        },
        "tool_calls",
    ),
    (
        "thinking_dropped_text_and_tool",
        _message(
            [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_2", "name": "f", "input": {}},
            ],
            "tool_use",
        ),
        {
            "role": "assistant",
            "content": "Let me check.",
            "refusal": None,
            "tool_calls": [{"id": "toolu_2", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        "tool_calls",
    ),
    (
        "max_tokens",
        _message([{"type": "text", "text": "cut"}], "max_tokens"),
        {"role": "assistant", "content": "cut", "refusal": None},
        "length",
    ),
]


@pytest.mark.parametrize(("message", "reply", "finish"), [r[1:] for r in RESPONSES], ids=[r[0] for r in RESPONSES])
def test_anthropic_message_translates_to_chat_completion(
    message: dict[str, Any], reply: dict[str, Any], finish: str
) -> None:
    completion = to_openai_completion(message, created_s=42)
    assert completion["object"] == "chat.completion"
    assert (completion["id"], completion["model"], completion["created"]) == ("msg_01", "claude-x", 42)
    assert completion["choices"] == [{"index": 0, "message": reply, "logprobs": None, "finish_reason": finish}]
    assert completion["usage"]["prompt_tokens"] == 3 and completion["usage"]["completion_tokens"] == 4


def _error(etype: str, message: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": etype, "message": message}, "request_id": "req_1"}).encode()


ERRORS = [
    ("400_invalid", 400, _error("invalid_request_error", "messages: bad"), FailureKind.CLIENT_ERROR),
    (
        "400_prompt_too_long",
        400,
        _error("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"),
        FailureKind.CONTEXT_LENGTH,
    ),
    (
        "400_credit_balance",
        400,
        _error("invalid_request_error", "Your credit balance is too low to access the Anthropic API."),
        FailureKind.QUOTA_EXHAUSTED,
    ),
    ("401", 401, _error("authentication_error", "invalid x-api-key"), FailureKind.AUTH),
    ("403", 403, _error("permission_error", "no access"), FailureKind.AUTH),
    ("404", 404, _error("not_found_error", "model: claude-nope"), FailureKind.CLIENT_ERROR),
    (
        "413",
        413,
        _error("request_too_large", "Request exceeds the maximum allowed number of bytes."),
        FailureKind.CLIENT_ERROR,
    ),
    ("429", 429, _error("rate_limit_error", "slow down"), FailureKind.RATE_LIMITED),
    ("500", 500, _error("api_error", "Internal server error"), FailureKind.SERVER_ERROR),
    ("504", 504, _error("timeout_error", "timed out"), FailureKind.TIMEOUT),
    ("529", 529, _error("overloaded_error", "Overloaded"), FailureKind.SERVER_ERROR),
    ("200_overloaded_body", 200, _error("overloaded_error", "Overloaded"), FailureKind.SERVER_ERROR),
    ("200_rate_limit_body", 200, _error("rate_limit_error", "slow down"), FailureKind.RATE_LIMITED),
    ("200_not_a_message", 200, b'{"choices": []}', FailureKind.MALFORMED),
    ("200_not_json", 200, b"<html>", FailureKind.MALFORMED),
]


@pytest.mark.parametrize(("status", "content", "kind"), [r[1:] for r in ERRORS], ids=[r[0] for r in ERRORS])
def test_anthropic_error_answers_classify_like_their_status(status: int, content: bytes, kind: FailureKind) -> None:
    result = outcome_of_message(status, httpx.Headers(), content, NOW_S)
    assert result.body is None
    assert classify(result.outcome) is kind


def test_error_body_type_and_message_reach_the_outcome() -> None:
    outcome = outcome_of_message(529, httpx.Headers(), _error("overloaded_error", "Overloaded"), NOW_S).outcome
    assert (outcome.status, outcome.error_type, outcome.message) == (529, "overloaded_error", "Overloaded")


def test_malformed_success_is_a_protocol_failure() -> None:
    assert outcome_of_message(200, httpx.Headers(), b"{}", NOW_S).outcome.transport is TransportError.PROTOCOL


@pytest.mark.parametrize(
    ("headers", "hint_s"),
    [
        ({"retry-after": "7"}, 7.0),
        (
            {
                "anthropic-ratelimit-requests-remaining": "0",
                "anthropic-ratelimit-requests-reset": "2025-06-15T15:07:00Z",
            },
            20.0,
        ),
    ],
    ids=["retry_after", "ratelimit_reset"],
)
def test_429_hint_comes_from_anthropic_headers(headers: dict[str, str], hint_s: float) -> None:
    result = outcome_of_message(429, httpx.Headers(headers), _error("rate_limit_error", "slow"), 1_750_000_000.0)
    assert result.outcome.retry_after_s == pytest.approx(hint_s)


def test_success_body_is_a_chat_completion_with_usage() -> None:
    content = json.dumps(_message([{"type": "text", "text": "ok"}])).encode()
    result = outcome_of_message(200, httpx.Headers(), content, NOW_S)
    assert classify(result.outcome) is FailureKind.SUCCESS
    assert result.body is not None and json.loads(result.body)["choices"][0]["message"]["content"] == "ok"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (3, 4)
