"""The Responses family of `api: responses` offers: its request, its complete answers, and the
translation of its stream events into chat chunks for the gateway's accounting (commit point,
finish, usage, errors) while the events themselves are gathered as sent."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from httpx_sse import ServerSentEvent

from turnout.adapters.base import CallSpec, Refusal
from turnout.adapters.commit import DONE, is_content
from turnout.adapters.openai_responses import (
    NOT_RESPONSES,
    OPENAI_RESPONSES,
    error_event,
    outcome_of_response_object,
    translated_events,
)
from turnout.adapters.responses_chunks import ChunkTranslator, StreamError, usage_of
from turnout.core.native import MESSAGES, RESPONSES, Native
from turnout.core.types import Target, TransportError

USAGE = {"input_tokens": 9, "output_tokens": 4, "total_tokens": 13}
OUTPUT: Any = [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}]


def _response(status: str = "completed", **extra: Any) -> dict[str, Any]:
    return {"id": "resp_up", "object": "response", "model": "up", "status": status, "output": OUTPUT, **extra}


def _feed(events: list[dict[str, Any]]) -> list[Any]:
    """Every chunk of `events` in order (a terminal event's closing chunks after it)."""
    translator = ChunkTranslator(created_s=7)
    out: list[Any] = []
    for data in events:
        chunks = translator.feed(data)
        if chunks == "done":
            out.extend(translator.final(data))
            out.append("DONE")
            break
        out.extend(chunks)
    return out


def _delta(chunk: dict[str, Any]) -> dict[str, Any]:
    delta: dict[str, Any] = chunk["choices"][0]["delta"]
    return delta


CREATED = {"type": "response.created", "response": {"id": "resp_up", "model": "up", "status": "in_progress"}}


def test_text_deltas_become_content_chunks_and_completed_a_stop_with_usage() -> None:
    chunks = _feed(
        [
            CREATED,
            {"type": "response.in_progress", "response": {}},
            {"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "m"}},
            {"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "delta": "Hel"},
            {"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "delta": "lo"},
            {"type": "response.output_text.done", "item_id": "m", "text": "Hello"},
            {"type": "response.completed", "response": _response(usage=USAGE)},
        ]
    )
    opening, first, second, finish, usage, done = chunks
    assert _delta(opening) == {"role": "assistant", "content": ""} and not is_content(opening)
    assert opening["id"] == "resp_up" and opening["model"] == "up" and opening["created"] == 7
    assert opening["object"] == "chat.completion.chunk"
    assert [_delta(first), _delta(second)] == [{"content": "Hel"}, {"content": "lo"}] and is_content(first)
    assert finish["choices"][0]["finish_reason"] == "stop"
    assert usage["choices"] == [] and usage["usage"] == {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}
    assert done == "DONE"


def test_a_function_call_becomes_a_tool_call_and_finishes_with_tool_calls() -> None:
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": ""}
    chunks = _feed(
        [
            CREATED,
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": '{"ci'},
            {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": 'ty":1}'},
            {"type": "response.function_call_arguments.done", "item_id": "fc_1", "arguments": '{"city":1}'},
            {"type": "response.completed", "response": _response(usage=USAGE)},
        ]
    )
    _, opened, a, b, finish, _, _ = chunks
    assert _delta(opened) == {
        "tool_calls": [
            {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
        ]
    }
    assert is_content(opened)
    assert _delta(a)["tool_calls"] == [{"index": 0, "function": {"arguments": '{"ci'}}]
    assert _delta(b)["tool_calls"] == [{"index": 0, "function": {"arguments": 'ty":1}'}}]
    assert finish["choices"][0]["finish_reason"] == "tool_calls"


def test_built_in_tool_events_and_reasoning_give_no_chunk() -> None:
    search = {"type": "web_search_call", "id": "ws_1", "status": "in_progress"}
    chunks = _feed(
        [
            {"type": "response.output_item.added", "output_index": 0, "item": search},
            {"type": "response.web_search_call.searching", "item_id": "ws_1", "output_index": 0},
            {"type": "response.reasoning_summary_text.delta", "delta": "thinking"},
            {"type": "response.output_item.done", "output_index": 0, "item": {**search, "status": "completed"}},
        ]
    )
    assert chunks == []


@pytest.mark.parametrize(
    ("details", "finish"),
    [({"reason": "max_output_tokens"}, "length"), ({"reason": "content_filter"}, "content_filter"), (None, "stop")],
)
def test_an_incomplete_response_finishes_by_its_reason(details: Any, finish: str) -> None:
    event = {"type": "response.incomplete", "response": _response("incomplete", incomplete_details=details)}
    chunks = _feed([event])
    assert chunks[0]["choices"][0]["finish_reason"] == finish and chunks[-1] == "DONE"
    assert chunks[1]["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


@pytest.mark.parametrize(
    ("event", "etype", "message"),
    [
        (
            {
                "type": "response.failed",
                "response": _response("failed", error={"code": "server_error", "message": "x"}),
            },
            "server_error",
            "x",
        ),
        (
            {"type": "response.failed", "response": {"status": "failed"}},
            "server_error",
            "the provider's response failed",
        ),
        ({"type": "error", "code": "rate_limit_exceeded", "message": "slow down"}, "rate_limit_exceeded", "slow down"),
    ],
    ids=["failed", "failed-without-error", "error-event"],
)
def test_a_failure_is_a_stream_error(event: dict[str, Any], etype: str, message: str) -> None:
    with pytest.raises(StreamError) as info:
        ChunkTranslator(created_s=0).feed(event)
    assert (info.value.error_type, info.value.message) == (etype, message)


@pytest.mark.parametrize(
    ("usage", "counts"),
    [(USAGE, (9, 4)), (None, (0, 0)), ({"input_tokens": -1, "output_tokens": True}, (0, 0)), ("x", (0, 0))],
)
def test_usage_of_reads_a_responses_usage(usage: Any, counts: tuple[int, int]) -> None:
    assert usage_of(usage) == counts


async def _batches(batches: list[list[tuple[str, str]]]) -> AsyncIterator[list[ServerSentEvent]]:
    for batch in batches:
        yield [ServerSentEvent(event=name, data=data) for name, data in batch]


def _sse(data: dict[str, Any]) -> tuple[str, str]:
    return str(data["type"]), json.dumps(data)


async def test_translated_events_gather_the_provider_events_as_sent_and_end_at_completed() -> None:
    frames = OPENAI_RESPONSES.native_frames()
    delta = {"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "delta": "hi"}
    raw = [
        [_sse(CREATED), _sse({"type": "response.web_search_call.searching", "item_id": "w"})],
        [_sse(delta)],
        [_sse({"type": "response.completed", "response": _response(usage=USAGE)})],
    ]
    out = [batch async for batch in translated_events(_batches(raw), ChunkTranslator(created_s=0), frames)]
    assert [len(b) for b in out] == [1, 1, 3] and out[-1][-1].data == DONE
    sent = frames.take().decode()
    assert sent.count("event: ") == 4 and sent.startswith("event: response.created\ndata: ")
    assert f"data: {json.dumps(delta)}\n\n" in sent


async def test_a_failed_stream_yields_an_error_event_that_is_not_relayed_as_sent() -> None:
    frames = OPENAI_RESPONSES.native_frames()
    failed = {
        "type": "response.failed",
        "response": _response("failed", error={"code": "server_error", "message": "m"}),
    }
    out = [
        b
        async for b in translated_events(
            _batches([[_sse(CREATED), _sse(failed)]]), ChunkTranslator(created_s=0), frames
        )
    ]
    [[_opening, error]] = out
    assert error.event == "error"
    assert json.loads(error.data) == {"error": {"type": "server_error", "code": "server_error", "message": "m"}}
    assert "response.failed" not in frames.take().decode()  # the relay ends with its own error event


def test_the_relays_error_event_is_a_responses_error_event() -> None:
    frame = error_event("the upstream provider failed mid-stream", "upstream_error", None)
    name, data = frame.decode().strip().split("\n")
    assert name == "event: error"
    assert json.loads(data.removeprefix("data: ")) == {
        "type": "error",
        "code": "upstream_error",
        "message": "the upstream provider failed mid-stream",
        "param": None,
    }
    assert json.loads(error_event("m", "stream_stalled", "server_error").split(b"data: ")[1])["code"] == "server_error"


def test_a_complete_response_is_kept_as_is_with_its_usage() -> None:
    body = json.dumps(_response(usage=USAGE)).encode()
    result = outcome_of_response_object(200, httpx.Headers(), body, 0.0)
    assert result.body == body and result.shape == RESPONSES
    assert (result.usage.input_tokens, result.usage.output_tokens) == (9, 4)


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (200, _response("failed", error={"code": "rate_limit_exceeded", "message": "slow"}), "in_body"),
        (200, {"error": {"type": "server_error", "message": "boom"}}, "in_body"),
        (503, {"error": {"type": "server_error", "message": "busy"}}, "status"),
        (200, {"object": "chat.completion", "choices": []}, "protocol"),
    ],
    ids=["failed-response", "envelope", "error-status", "not-a-response"],
)
def test_a_failed_answer_is_a_failure(status: int, body: Any, kind: str) -> None:
    result = outcome_of_response_object(status, httpx.Headers(), json.dumps(body).encode(), 0.0)
    assert result.body is None
    if kind == "in_body":
        assert result.outcome.error_in_body and result.outcome.error_type in ("rate_limit_exceeded", "server_error")
    elif kind == "status":
        assert result.outcome.status == 503 and result.outcome.message == "busy"
    else:
        assert result.outcome.transport is TransportError.PROTOCOL


def _spec(native: Native | None) -> CallSpec:
    return CallSpec(
        target=Target(provider="oai", model="deep", catalog_model="deep"),
        base_url="https://api.openai.example/v1",
        api_key="sk-target",
        body=b'{"model":"deep","input":"hi","store":false}',
        timeout_s=5.0,
        request_id="rid-1",
        native=native,
        api="responses",
    )


async def test_a_native_call_posts_the_body_as_is_to_responses() -> None:
    native = Native(surface=RESPONSES, body=b"{}", headers=(("openai-beta", "responses=v1"),))
    async with httpx.AsyncClient() as client:
        for stream in (False, True):
            request = OPENAI_RESPONSES.build_request(client, _spec(native), stream=stream)
            assert isinstance(request, httpx.Request)
            assert request.url == "https://api.openai.example/v1/responses"
            assert request.content == b'{"model":"deep","input":"hi","store":false}'
            assert request.headers["authorization"] == "Bearer sk-target"
            assert request.headers["openai-beta"] == "responses=v1" and request.headers["x-request-id"] == "rid-1"
            assert (request.headers.get("accept") == "text/event-stream") is stream
        refused = OPENAI_RESPONSES.build_request(client, _spec(None), stream=False)
        assert not isinstance(refused, httpx.Request) and refused.outcome.status == 400


def test_only_a_responses_request_is_not_refused() -> None:
    request = {"model": "m", "messages": []}
    assert OPENAI_RESPONSES.refusal(request, "deep", Native(surface=RESPONSES, body=b"{}")) is None
    for native in (None, Native(surface=MESSAGES, body=b"{}")):
        assert OPENAI_RESPONSES.refusal(request, "deep", native) == Refusal(NOT_RESPONSES, "model")
