"""The Gemini translation, both ways: an OpenAI chat request as a `GenerateContentRequest`
(system instruction, roles, images as inline data, function declarations, tool choice, tool
calls and results, JSON output, generation config, what is refused) and a
`GenerateContentResponse` as a `chat.completion` (text, calls with ids, finish reasons, usage,
safety blocks)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from turnout.adapters.chat_parts import WireError
from turnout.adapters.gemini_wire import blocked, finish_reason, openai_usage, to_gemini_request, to_openai_completion

USER = {"role": "user", "content": "weather in Paris?"}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "the weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "additionalProperties": False},
    },
}


def test_system_and_developer_messages_become_the_system_instruction_and_roles_user_and_model() -> None:
    body = {
        "messages": [
            {"role": "system", "content": "be brief"},
            USER,
            {"role": "assistant", "content": "sunny"},
            {"role": "developer", "content": [{"type": "text", "text": "in French"}]},
            {"role": "user", "content": "and tomorrow?"},
        ]
    }
    out = to_gemini_request(body)
    assert out["systemInstruction"] == {"parts": [{"text": "be brief\n\nin French"}]}
    assert out["contents"] == [
        {"role": "user", "parts": [{"text": "weather in Paris?"}]},
        {"role": "model", "parts": [{"text": "sunny"}]},
        {"role": "user", "parts": [{"text": "and tomorrow?"}]},
    ]
    assert "generationConfig" not in out and "tools" not in out


def test_a_data_url_image_is_inline_data_and_a_remote_one_is_refused() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    out = to_gemini_request({"messages": [{"role": "user", "content": [{"type": "text", "text": "what?"}, image]}]})
    assert out["contents"][0]["parts"][1] == {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}
    remote = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    with pytest.raises(WireError) as refused:
        to_gemini_request({"messages": [{"role": "user", "content": [remote]}]})
    assert refused.value.param == "messages[0].content[0].image_url.url"


def test_tools_tool_choice_calls_and_results_round_trip_by_the_calls_name() -> None:
    call = {"id": "call_x_0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
    signed = {**call, "id": "call_x_1", "extra_content": {"google": {"thought_signature": "c2ln"}}}
    body = {
        "messages": [
            USER,
            {"role": "assistant", "content": None, "tool_calls": [call, signed]},
            {"role": "tool", "tool_call_id": "call_x_0", "content": '{"temperature": "22C"}'},
            {"role": "tool", "tool_call_id": "call_x_1", "content": "rainy"},
        ],
        "tools": [WEATHER],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    }
    out = to_gemini_request(body)
    assert out["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "the weather of a city",
                    "parametersJsonSchema": WEATHER["function"]["parameters"],  # type: ignore[index]
                }
            ]
        }
    ]
    assert out["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}}
    model, results = out["contents"][1], out["contents"][2]
    assert model == {
        "role": "model",
        "parts": [
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2ln"},
        ],
    }
    assert results == {
        "role": "user",  # both results in one turn
        "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"temperature": "22C"}}},
            {"functionResponse": {"name": "get_weather", "response": {"result": "rainy"}}},
        ],
    }


@pytest.mark.parametrize(("choice", "mode"), [("auto", "AUTO"), ("none", "NONE"), ("required", "ANY")])
def test_tool_choice_modes(choice: str, mode: str) -> None:
    out = to_gemini_request({"messages": [USER], "tools": [WEATHER], "tool_choice": choice})
    assert out["toolConfig"] == {"functionCallingConfig": {"mode": mode}}


def test_json_schema_and_json_object_output_and_the_generation_config() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    body: dict[str, Any] = {
        "messages": [USER],
        "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema, "strict": True}},
        "temperature": 0.2,
        "top_p": 0.9,
        "max_completion_tokens": 50,
        "max_tokens": 10,
        "stop": "END",
        "seed": 7,
        "presence_penalty": 0.5,
    }
    config = to_gemini_request(body)["generationConfig"]
    assert config == {
        "temperature": 0.2,
        "topP": 0.9,
        "maxOutputTokens": 50,
        "stopSequences": ["END"],
        "seed": 7,
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,
    }
    plain = to_gemini_request({"messages": [USER], "response_format": {"type": "json_object"}, "stop": ["a", "b"]})
    assert plain["generationConfig"] == {"responseMimeType": "application/json", "stopSequences": ["a", "b"]}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": [USER], "n": 2}, "n"),
        ({"messages": [{"role": "function", "name": "f", "content": "x"}]}, "messages[0].role"),
        ({"messages": [USER], "tools": [{"type": "web_search"}]}, "tools[0]"),
        ({"messages": [USER, {"role": "tool", "tool_call_id": "nope", "content": "x"}]}, "messages[1].tool_call_id"),
        ({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]}, "messages[0].content[0]"),
        ({"messages": [USER], "tool_choice": "sometimes"}, "tool_choice"),
    ],
)
def test_what_gemini_cannot_express_is_refused_naming_the_field(body: dict[str, Any], param: str) -> None:
    with pytest.raises(WireError) as refused:
        to_gemini_request(body)
    assert refused.value.param == param


def _answer(parts: list[dict[str, Any]], finish: str = "STOP", **extra: Any) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish}],
        "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 4, "thoughtsTokenCount": 2},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r1",
        **extra,
    }


def test_an_answer_becomes_a_chat_completion_thoughts_left_out() -> None:
    data = _answer([{"text": "thinking...", "thought": True}, {"text": "Hello"}, {"text": " world"}])
    out = to_openai_completion(data, model="m", created_s=5)
    assert out["id"] == "chatcmpl-r1" and out["model"] == "gemini-2.5-flash" and out["created"] == 5
    assert out["choices"][0]["message"] == {"role": "assistant", "content": "Hello world", "refusal": None}
    assert out["choices"][0]["finish_reason"] == "stop"
    assert out["usage"]["prompt_tokens"] == 9 and out["usage"]["completion_tokens"] == 6
    assert out["usage"]["completion_tokens_details"] == {"reasoning_tokens": 2}


def test_function_calls_get_ids_and_finish_tool_calls() -> None:
    parts: list[dict[str, Any]] = [
        {"text": "Let me look."},
        {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2ln"},
        {"functionCall": {"id": "given", "name": "get_time", "args": {}}},
    ]
    message = to_openai_completion(_answer(parts), model="m", created_s=5)["choices"][0]
    calls = message["message"]["tool_calls"]
    assert [c["id"] for c in calls] == ["call_r1_0", "given"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Paris"}
    assert calls[0]["extra_content"] == {"google": {"thought_signature": "c2ln"}}
    assert message["finish_reason"] == "tool_calls" and message["message"]["content"] == "Let me look."


@pytest.mark.parametrize(
    ("reason", "calls", "expected"),
    [
        ("STOP", False, "stop"),
        ("MAX_TOKENS", False, "length"),
        ("SAFETY", False, "content_filter"),
        ("PROHIBITED_CONTENT", True, "content_filter"),
        ("MALFORMED_FUNCTION_CALL", False, "stop"),
        (None, True, "tool_calls"),
    ],
)
def test_finish_reasons(reason: str | None, calls: bool, expected: str) -> None:
    assert finish_reason(reason, calls) == expected


def test_safety_blocks_of_the_prompt_or_of_an_answer_without_content() -> None:
    assert blocked({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}) is not None
    assert blocked(_answer([], "SAFETY")) is not None
    assert blocked(_answer([{"text": "partial"}], "SAFETY")) is None  # content came: finish content_filter
    assert blocked(_answer([{"text": "ok"}])) is None


def test_usage_counts_tool_prompts_and_cached_tokens() -> None:
    usage = openai_usage({"promptTokenCount": 10, "toolUsePromptTokenCount": 3, "cachedContentTokenCount": 4})
    assert usage["prompt_tokens"] == 13 and usage["prompt_tokens_details"] == {"cached_tokens": 4}
    assert openai_usage(None)["total_tokens"] == 0
