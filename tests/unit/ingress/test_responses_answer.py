"""The fleet's `chat.completion` -> a Response object (`turnout_ingress.surfaces.responses.answer`), and the
Response's output back to chat messages for the stored conversation."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnout_ingress.surfaces.responses.answer import output_messages, to_response, usage_of, with_ids
from turnout_ingress.surfaces.responses.request import translate_request

ECHO = translate_request({"model": "m", "input": "hi"}).echo


def _completion(message: dict[str, Any], finish: str = "stop", usage: Any = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "served-model",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": usage or {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    }


def _response(completion: dict[str, Any]) -> dict[str, Any]:
    return to_response(completion, request_id="abc", created_at=1700000000, echo=ECHO, model="m")


def test_text_answer_is_a_completed_message_with_an_output_text_part() -> None:
    response = _response(_completion({"content": "hello"}))
    assert {
        k: response[k] for k in ("id", "object", "created_at", "status", "model", "error", "incomplete_details")
    } == {
        "id": "resp_abc",
        "object": "response",
        "created_at": 1700000000,
        "status": "completed",
        "model": "served-model",
        "error": None,
        "incomplete_details": None,
    }
    assert response["output"] == [
        {
            "id": "msg_abc",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "hello", "annotations": [], "logprobs": []}],
        }
    ]
    assert response["usage"] == {
        "input_tokens": 7,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 3,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 10,
    }
    assert "output_text" not in response
    assert all(response[k] == v for k, v in ECHO.items())


def test_tool_calls_are_function_call_items_with_the_chat_call_id() -> None:
    calls = [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}},
        {"id": "call_2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
    ]
    response = _response(_completion({"content": None, "tool_calls": calls}, "tool_calls"))
    assert response["output"] == [
        {
            "id": "fc_abc_0",
            "type": "function_call",
            "status": "completed",
            "call_id": "call_1",
            "name": "f",
            "arguments": '{"a":1}',
        },
        {
            "id": "fc_abc_1",
            "type": "function_call",
            "status": "completed",
            "call_id": "call_2",
            "name": "g",
            "arguments": "{}",
        },
    ]
    assert response["status"] == "completed"


@pytest.mark.parametrize(
    ("finish", "status", "reason"),
    [
        ("stop", "completed", None),
        ("length", "incomplete", "max_output_tokens"),
        ("content_filter", "incomplete", "content_filter"),
    ],
)
def test_finish_reason_sets_status_and_incomplete_details(finish: str, status: str, reason: str | None) -> None:
    response = _response(_completion({"content": "x"}, finish))
    assert response["status"] == status and response["output"][0]["status"] == status
    assert response["incomplete_details"] == ({"reason": reason} if reason else None)


def test_a_refusal_is_a_refusal_part() -> None:
    response = _response(_completion({"content": None, "refusal": "no"}))
    assert response["output"][0]["content"] == [{"type": "refusal", "refusal": "no"}]


def test_usage_details_are_carried() -> None:
    usage = {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 15,
        "prompt_tokens_details": {"cached_tokens": 4},
        "completion_tokens_details": {"reasoning_tokens": 2},
    }
    assert usage_of(usage)["input_tokens_details"] == {"cached_tokens": 4}
    assert usage_of(usage)["output_tokens_details"] == {"reasoning_tokens": 2}
    assert usage_of(None)["total_tokens"] == 0


def test_input_items_get_ids_and_a_status() -> None:
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": []},
        {"type": "function_call_output", "call_id": "c", "output": "o"},
    ]
    assert [(i["id"], i["status"]) for i in with_ids(items, "r1")] == [
        ("msg_in_r1_0", "completed"),
        ("fco_in_r1_1", "completed"),
    ]


def test_output_messages_of_text_and_calls_are_one_assistant_message() -> None:
    calls = [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    response = _response(_completion({"content": "thinking", "tool_calls": calls}, "tool_calls"))
    assert output_messages(response["output"]) == [{"role": "assistant", "content": "thinking", "tool_calls": calls}]
    assert output_messages([]) == []


_CALL = st.fixed_dictionaries(
    {
        "id": st.text(min_size=1, max_size=8),
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {"name": st.from_regex(r"[a-z]{1,8}", fullmatch=True), "arguments": st.text(max_size=12)}
        ),
    }
)


@given(st.text(max_size=30), st.lists(_CALL, max_size=4))
def test_a_completion_and_its_stored_messages_round_trip(text: str, calls: list[dict[str, Any]]) -> None:
    message: dict[str, Any] = {"content": text or None}
    if calls:
        message["tool_calls"] = calls
    response = _response(_completion(message, "tool_calls" if calls else "stop"))
    [back] = output_messages(response["output"])
    assert back.get("tool_calls", []) == calls
    assert back["content"] == (text if text or not calls else None)
