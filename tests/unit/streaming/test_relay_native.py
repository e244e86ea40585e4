"""A native stream (SPEC §13) is relayed as the provider sent it — thinking and signature deltas,
pings and cache usage included — one write per read, while the relay still reads its usage,
its finish and its errors; a break ends it with the surface's own final event, never continued.

The stream is read through the real families (`event_batches`, the Anthropic translation) from a
body arriving in given reads; the relay's yields are the client's writes.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from support.streams import Finishes, Reads
from turnout.adapters.anthropic_chat import ANTHROPIC_MESSAGES
from turnout.adapters.base import ApiFamily, Usage
from turnout.adapters.commit import until_commit
from turnout.adapters.openai_chat import OPENAI_CHAT
from turnout.core.types import FailureKind, Target
from turnout.streaming.relay import relay


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


START = _event(
    "message_start",
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-up",
            "content": [],
            "stop_reason": None,
            "usage": {
                "input_tokens": 4,
                "cache_creation_input_tokens": 100,
                "cache_read_input_tokens": 900,
                "output_tokens": 1,
            },
        },
    },
)
THINK = (
    _event(
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
    )
    + _event(
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}},
    )
    + _event(
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "c2ln"}},
    )
    + _event("content_block_stop", {"type": "content_block_stop", "index": 0})
)
TEXT_START = _event(
    "content_block_start", {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}
)
PING = _event("ping", {"type": "ping"})
TOKENS = [
    _event(
        "content_block_delta",
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": f"t{i} "}},
    )
    for i in range(6)
]
CLOSE = _event("content_block_stop", {"type": "content_block_stop", "index": 1}) + _event(
    "message_delta",
    {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": 6},
    },
)
STOP = _event("message_stop", {"type": "message_stop"})
OVERLOADED = _event("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})


async def _writes(
    *reads: bytes, cut: bool = False, family: ApiFamily = ANTHROPIC_MESSAGES
) -> tuple[list[bytes], Finishes]:
    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Reads(*reads, cut=cut))
    native = family.native_frames()
    result = await until_commit(response, family.stream_events(response, native), stream_end=family.stream_end)
    assert result.stream is not None
    result.stream.native = native
    finish = Finishes()
    frames = relay(result.stream, finish=finish, include_usage=False, stall_timeout_s=None, request_id="r")
    return [w async for w in frames], finish


WHOLE_USAGE = Usage(input_tokens=1004, output_tokens=6)  # cache reads and writes counted as input


async def test_a_native_stream_reaches_the_client_byte_for_byte() -> None:
    body = START + THINK + TEXT_START + PING + b"".join(TOKENS) + CLOSE + STOP
    writes, finish = await _writes(body)
    assert b"".join(writes) == body
    assert finish.calls == [(FailureKind.SUCCESS, WHOLE_USAGE, "")]


async def test_each_read_of_a_native_stream_is_one_write_pings_and_thinking_included() -> None:
    reads = [START, THINK, TEXT_START + TOKENS[0], PING, b"".join(TOKENS[1:]), CLOSE, STOP]
    writes, finish = await _writes(*reads)
    # everything up to the commit point (the first text) goes out in its read's write
    assert writes == [START + THINK + TEXT_START + TOKENS[0], PING, b"".join(TOKENS[1:]), CLOSE, STOP]
    assert finish.calls == [(FailureKind.SUCCESS, WHOLE_USAGE, "")]


async def test_a_native_stream_cut_after_content_ends_with_an_anthropic_error_event() -> None:
    writes, finish = await _writes(START + TEXT_START + TOKENS[0], TOKENS[1], cut=True)
    sent = b"".join(writes)
    assert sent.startswith(START + TEXT_START + TOKENS[0] + TOKENS[1])
    last = sent.split(b"\n\n")[-2]
    assert last.startswith(b"event: error\ndata: ")
    error = json.loads(last.split(b"data: ", 1)[1])
    assert error == {"type": "error", "error": {"type": "api_error", "message": error["error"]["message"]}}
    assert b"message_stop" not in sent
    [(kind, _, message)] = finish.calls
    assert kind is FailureKind.TRANSPORT and message == error["error"]["message"]


async def test_an_upstream_error_event_mid_stream_ends_it_once_with_its_own_type() -> None:
    writes, finish = await _writes(START + TEXT_START + TOKENS[0], TOKENS[1] + OVERLOADED)
    sent = b"".join(writes)
    assert sent.count(b"event: error") == 1 and sent.startswith(START + TEXT_START + TOKENS[0] + TOKENS[1])
    error = json.loads(sent.split(b"event: error\ndata: ", 1)[1])
    assert error["error"] == {
        "type": "overloaded_error",
        "message": "the upstream provider failed mid-stream: Overloaded",
    }
    assert finish.calls[0][0] is FailureKind.SERVER_ERROR


async def test_a_native_stream_whose_body_ends_after_its_finish_gets_its_message_stop() -> None:
    writes, finish = await _writes(START + TEXT_START + TOKENS[0], CLOSE)
    assert b"".join(writes) == START + TEXT_START + TOKENS[0] + CLOSE + STOP
    assert finish.calls[0][0] is FailureKind.SUCCESS


async def test_malformed_native_data_after_content_is_skipped_not_forwarded() -> None:
    bad = b'event: content_block_delta\ndata: {"type": "content_block_delta", \n\n'
    writes, _ = await _writes(START + TEXT_START + TOKENS[0], bad + TOKENS[1], CLOSE + STOP)
    assert b"".join(writes) == START + TEXT_START + TOKENS[0] + TOKENS[1] + CLOSE + STOP


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


async def test_a_native_chat_stream_reaches_its_client_byte_for_byte_too() -> None:
    body = (
        _chunk({"role": "assistant", "content": ""})
        + _chunk({"content": "a"})
        + _chunk({}, "stop")
        + b"data: [DONE]\n\n"
    )
    writes, finish = await _writes(body[:60], body[60:], family=OPENAI_CHAT)
    assert b"".join(writes) == body
    assert finish.calls[0][0] is FailureKind.SUCCESS


class _NoContinuation:
    """A continuation the relay must never ask for (a native stream is never continued)."""

    async def resume(self, delivered_text: str, broken: Any) -> None:
        raise AssertionError(f"a native stream was continued after {delivered_text!r}")


async def test_a_broken_native_stream_is_never_continued() -> None:
    response = httpx.Response(
        200, headers={"content-type": "text/event-stream"}, stream=Reads(START + TEXT_START + TOKENS[0], cut=True)
    )
    native = ANTHROPIC_MESSAGES.native_frames()
    result = await until_commit(response, ANTHROPIC_MESSAGES.stream_events(response, native), stream_end="message_stop")
    assert result.stream is not None
    result.stream.native = native
    continuation: Any = _NoContinuation()
    target = Target(provider="claude", model="claude-up", catalog_model="claude")
    frames = relay(
        result.stream,
        finish=Finishes(),
        include_usage=False,
        stall_timeout_s=None,
        request_id="r",
        continuation=continuation,
        target=target,
    )
    sent = b"".join([w async for w in frames])
    assert sent.startswith(START + TEXT_START + TOKENS[0]) and b"event: error" in sent
