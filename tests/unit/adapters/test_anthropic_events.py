"""Anthropic stream events -> OpenAI chunks: translation tables and the commit point."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from httpx_sse import ServerSentEvent

from turnout.adapters.anthropic_chat import translated_events
from turnout.adapters.anthropic_events import DONE, ChunkTranslator, StreamError
from turnout.adapters.base import CallSpec
from turnout.adapters.exchange import open_stream
from turnout.core.classify import classify
from turnout.core.types import FailureKind, Target, TransportError

Event = tuple[str, dict[str, Any]]
"""One stream event: its name and its data."""

START: Event = (
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
            "usage": {
                "input_tokens": 5,
                "cache_read_input_tokens": 20,
                "cache_creation_input_tokens": 0,
                "output_tokens": 1,
            },
        },
    },
)
TEXT_START: Event = (
    "content_block_start",
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
)
PING: Event = ("ping", {"type": "ping"})


async def open_messages_stream(
    client: httpx.AsyncClient,
    *,
    base_url: str,
    api_key: str,
    body: bytes,
    timeout_s: float,
    ttft_timeout_s: float | None,
    request_id: str,
) -> Any:
    spec = CallSpec(
        target=Target(provider="anthropic", model="claude-x", catalog_model="claude-x"),
        base_url=base_url,
        api_key=api_key,
        body=body,
        timeout_s=timeout_s,
        ttft_timeout_s=ttft_timeout_s,
        request_id=request_id,
        kind="anthropic",
    )
    return await open_stream(client, spec)


def text(t: str, index: int = 0) -> tuple[str, dict[str, Any]]:
    return (
        "content_block_delta",
        {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": t}},
    )


def stop(index: int) -> tuple[str, dict[str, Any]]:
    return ("content_block_stop", {"type": "content_block_stop", "index": index})


def finish(reason: str, output_tokens: int) -> tuple[str, dict[str, Any]]:
    return (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        },
    )


END: Event = ("message_stop", {"type": "message_stop"})
TEXT_STREAM: list[Event] = [START, TEXT_START, PING, text("Hel"), text("lo"), stop(0), finish("end_turn", 2), END]
TOOL_STREAM: list[Event] = [
    START,
    TEXT_START,
    text("Checking."),
    stop(0),
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
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}},
    ),
    (
        "content_block_delta",
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"city": '}},
    ),
    (
        "content_block_delta",
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '"Oslo"}'}},
    ),
    stop(1),
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
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{}"}},
    ),
    stop(2),
    finish("tool_use", 30),
    END,
]


def _deltas(events: list[tuple[str, dict[str, Any]]]) -> tuple[list[Any], str | None]:
    """(each chunk's choice delta / finish / usage, the terminal marker)."""
    translator = ChunkTranslator(created_s=7)
    out: list[Any] = []
    for name, data in events:
        result = translator.feed(name, data)
        if isinstance(result, str):
            assert result == DONE
            return out, DONE
        for chunk in result:
            assert chunk["object"] == "chat.completion.chunk" and chunk["id"] == "msg_1"
            assert chunk["model"] == "claude-x" and chunk["created"] == 7
            if chunk["choices"]:
                [choice] = chunk["choices"]
                out.append(("finish", choice["finish_reason"]) if choice["finish_reason"] else choice["delta"])
            else:
                out.append(("usage", chunk["usage"]))
    return out, None


def test_text_stream_becomes_role_content_finish_usage_done() -> None:
    chunks, end = _deltas(TEXT_STREAM)
    assert end == DONE
    assert chunks == [
        {"role": "assistant", "content": ""},
        {"content": "Hel"},
        {"content": "lo"},
        ("finish", "stop"),
        (
            "usage",
            {
                "prompt_tokens": 25,
                "completion_tokens": 2,
                "total_tokens": 27,
                "prompt_tokens_details": {"cached_tokens": 20, "cache_creation_tokens": 0},
            },
        ),
    ]


def test_tool_use_stream_becomes_indexed_tool_call_deltas() -> None:
    chunks, end = _deltas(TOOL_STREAM)
    assert end == DONE
    assert chunks[:-1] == [
        {"role": "assistant", "content": ""},
        {"content": "Checking."},
        {
            "tool_calls": [
                {"index": 0, "id": "toolu_1", "type": "function", "function": {"name": "weather", "arguments": ""}}
            ]
        },
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '"Oslo"}'}}]},
        {
            "tool_calls": [
                {"index": 1, "id": "toolu_2", "type": "function", "function": {"name": "time", "arguments": ""}}
            ]
        },
        {"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]},
        ("finish", "tool_calls"),
    ]


@pytest.mark.parametrize(
    ("etype", "message"), [("overloaded_error", "Overloaded"), ("rate_limit_error", "slow"), ("api_error", "oops")]
)
def test_error_event_raises_with_its_type(etype: str, message: str) -> None:
    translator = ChunkTranslator(created_s=0)
    translator.feed(*START)
    with pytest.raises(StreamError) as caught:
        translator.feed("error", {"type": "error", "error": {"type": etype, "message": message}})
    assert (caught.value.error_type, caught.value.message) == (etype, message)


def test_unknown_and_keepalive_events_produce_nothing() -> None:
    translator = ChunkTranslator(created_s=0)
    events: list[Event] = [
        PING,
        ("content_block_stop", {"index": 0}),
        ("brand_new_event", {"type": "brand_new_event"}),
        ("content_block_delta", {"index": 0, "delta": {"type": "thinking_delta", "thinking": "x"}}),
    ]
    for name, data in events:
        assert translator.feed(name, data) == []


# ------------------------------------------------------- the commit point, over HTTP


def _sse(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return b"".join(f"event: {n}\ndata: {json.dumps(d)}\n\n".encode() for n, d in events)


async def _open(content: bytes, status: int = 200, content_type: str = "text/event-stream") -> Any:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, content=content, headers={"content-type": content_type})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        body = json.dumps({"model": "claude-x", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
        result = await open_messages_stream(
            client,
            base_url="https://api.example.test",
            api_key="sk-1",
            body=body.encode(),
            timeout_s=5,
            ttft_timeout_s=None,
            request_id="rid",
        )
        events = []
        if result.stream is not None:
            events = [(e.event, e.data) for e in result.stream.pending]
            events += [(e.event, e.data) async for batch in result.stream.events for e in batch]
            await result.stream.aclose()
    return result, events, seen


async def test_stream_request_speaks_anthropic_wire() -> None:
    _, _, [request] = await _open(_sse(TEXT_STREAM))
    assert str(request.url) == "https://api.example.test/v1/messages"
    assert request.headers["x-api-key"] == "sk-1" and request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    sent = json.loads(request.content)
    assert sent["stream"] is True and sent["max_tokens"] == 4096 and "stream_options" not in sent


async def test_stream_commits_at_first_text_delta_with_openai_frames_held() -> None:
    result, rest, _ = await _open(_sse(TEXT_STREAM))
    assert classify(result.outcome) is FailureKind.SUCCESS
    held = [json.loads(d)["choices"][0]["delta"] for d in result.stream.held]
    assert held == [{"role": "assistant", "content": ""}, {"content": "Hel"}]
    assert [json.loads(d)["choices"][0]["delta"] for _, d in rest[:2]] == [{"content": "lo"}, {}]
    assert json.loads(rest[1][1])["choices"][0]["finish_reason"] == "stop"
    assert json.loads(rest[2][1])["usage"]["completion_tokens"] == 2
    assert rest[3:] == [("message", "[DONE]")]


@pytest.mark.parametrize(
    ("etype", "kind"),
    [
        ("overloaded_error", FailureKind.SERVER_ERROR),
        ("rate_limit_error", FailureKind.RATE_LIMITED),
        ("api_error", FailureKind.SERVER_ERROR),
    ],
)
async def test_error_event_before_content_is_a_failed_attempt(etype: str, kind: FailureKind) -> None:
    error = ("error", {"type": "error", "error": {"type": etype, "message": "busy"}})
    result, _, _ = await _open(_sse([START, TEXT_START, PING, error]))
    assert result.stream is None
    assert result.outcome.error_in_body and result.outcome.error_type == etype
    assert classify(result.outcome) is kind


async def test_error_event_after_content_reaches_the_relay_as_an_error_event() -> None:
    error = ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
    result, rest, _ = await _open(_sse([START, TEXT_START, text("a"), text("b"), error, text("never")]))
    assert result.stream is not None
    assert rest[-1][0] == "error"
    assert json.loads(rest[-1][1]) == {"error": {"type": "overloaded_error", "message": "busy"}}


async def test_tool_use_start_is_the_commit_point() -> None:
    result, _, _ = await _open(_sse(TOOL_STREAM[:1] + TOOL_STREAM[4:6]))
    assert result.stream is not None
    assert "tool_calls" in json.loads(result.stream.held[-1])["choices"][0]["delta"]


async def test_stream_ending_before_content_is_a_reset() -> None:
    result, _, _ = await _open(_sse([START, TEXT_START, PING]))
    assert result.outcome.transport is TransportError.RESET


async def test_malformed_event_before_content_is_malformed() -> None:
    result, _, _ = await _open(_sse([START]) + b'event: content_block_delta\ndata: {"type": \n\n')
    assert classify(result.outcome) is FailureKind.MALFORMED


async def test_529_status_on_a_stream_request_keeps_type_and_status() -> None:
    body = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}).encode()
    result, _, _ = await _open(body, status=529, content_type="application/json")
    assert (result.outcome.status, result.outcome.error_type) == (529, "overloaded_error")
    assert classify(result.outcome) is FailureKind.SERVER_ERROR


async def test_json_message_answering_a_stream_request_is_malformed() -> None:
    body = json.dumps(
        {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "x",
            "content": [{"type": "text", "text": "hi"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    ).encode()
    result, _, _ = await _open(body, content_type="application/json")
    assert classify(result.outcome) is FailureKind.MALFORMED


async def test_untranslatable_request_is_a_400_without_a_call() -> None:
    calls: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(200)

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as c:
        body = json.dumps({"model": "x", "n": 3, "messages": [{"role": "user", "content": "hi"}]}).encode()
        result = await open_messages_stream(
            c, base_url="https://a.test", api_key="k", body=body, timeout_s=1, ttft_timeout_s=None, request_id="r"
        )
    assert calls == []
    assert result.outcome.status == 400 and classify(result.outcome) is FailureKind.CLIENT_ERROR


async def test_one_read_of_anthropic_events_is_one_list_of_openai_events_in_order() -> None:
    async def reads() -> AsyncIterator[list[ServerSentEvent]]:
        yield [ServerSentEvent(event=n, data=json.dumps(d)) for n, d in TEXT_STREAM[:5]]  # ping included
        yield [ServerSentEvent(event="ping", data='{"type": "ping"}')]  # translates to nothing: no list
        yield [ServerSentEvent(event=n, data=json.dumps(d)) for n, d in TEXT_STREAM[5:]]

    lists = [[e.data for e in batch] async for batch in translated_events(reads(), ChunkTranslator(created_s=0))]
    assert len(lists) == 2
    deltas = [json.loads(d)["choices"][0]["delta"] for d in lists[0]]
    assert deltas == [{"role": "assistant", "content": ""}, {"content": "Hel"}, {"content": "lo"}]
    assert lists[1][-1] == "[DONE]" and json.loads(lists[1][0])["choices"][0]["finish_reason"] == "stop"
