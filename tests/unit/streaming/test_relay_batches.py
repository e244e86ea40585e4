"""The relay writes each upstream read's events at once (SPEC §8): fewer writes, same bytes, same order.

A committed stream is read through the real OpenAI family (`event_batches`)
from a body arriving in given reads; the relay's yields are the client's
writes.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from support.streams import Finishes, Reads
from turnout.adapters.base import Usage
from turnout.adapters.commit import until_commit
from turnout.adapters.openai_chat import OPENAI_CHAT
from turnout.core.types import FailureKind
from turnout.streaming.relay import DONE_FRAME, relay


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _event(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data).encode() + b"\n\n"


ROLE = _event(_chunk({"role": "assistant", "content": ""}))
TOKENS = [_event(_chunk({"content": f"t{i} "})) for i in range(20)]
STOP = _event(_chunk({}, "stop"))
UPSTREAM_DONE = b"data: [DONE]\n\n"


async def _open(body: Reads) -> tuple[Any, Finishes]:
    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=body)
    result = await until_commit(response, OPENAI_CHAT.stream_events(response), stream_end="[DONE]")
    assert result.stream is not None
    return result.stream, Finishes()


async def _writes(*reads: bytes, cut: bool = False) -> tuple[list[bytes], Finishes]:
    stream, finish = await _open(Reads(*reads, cut=cut))
    frames = relay(stream, finish=finish, include_usage=False, stall_timeout_s=None, request_id="r")
    return [w async for w in frames], finish


def _data(writes: list[bytes]) -> list[str]:
    return [line[6:] for line in b"".join(writes).decode().split("\n") if line.startswith("data: ")]


def _texts(writes: list[bytes]) -> str:
    out = []
    for data in _data(writes):
        if data != "[DONE]" and "choices" in data:
            out += [c["delta"].get("content") or "" for c in json.loads(data)["choices"]]
    return "".join(out)


async def test_a_whole_stream_in_one_read_is_one_write_intact_and_in_order() -> None:
    body = ROLE + b"".join(TOKENS) + STOP + UPSTREAM_DONE
    writes, finish = await _writes(body)
    assert len(writes) == 1
    assert b"".join(writes) == body
    assert finish.calls == [(FailureKind.SUCCESS, Usage(), "")]


async def test_each_read_is_one_write() -> None:
    reads = [ROLE + TOKENS[0], b"".join(TOKENS[1:5]), b"".join(TOKENS[5:]) + STOP, UPSTREAM_DONE]
    writes, _ = await _writes(*reads)
    assert writes == reads


async def test_an_event_split_across_reads_goes_out_whole_with_the_read_that_completes_it() -> None:
    split = TOKENS[1]
    writes, _ = await _writes(ROLE + TOKENS[0] + split[:30], split[30:] + TOKENS[2], STOP + UPSTREAM_DONE)
    assert writes == [ROLE + TOKENS[0], split + TOKENS[2], STOP + UPSTREAM_DONE]


async def test_no_event_waits_for_a_later_read() -> None:
    gate = asyncio.Semaphore(0)
    body = Reads(ROLE + TOKENS[0] + TOKENS[1], TOKENS[2], STOP + UPSTREAM_DONE, gate=gate)
    stream, finish = await _open(body)
    frames = relay(stream, finish=finish, include_usage=False, stall_timeout_s=None, request_id="r")
    async with asyncio.timeout(10):  # a relay holding a frame back would wait here for a read that never comes
        assert await anext(frames) == ROLE + TOKENS[0] + TOKENS[1]
        assert body.served == 1
        gate.release()
        assert await anext(frames) == TOKENS[2]
        gate.release()
        assert await anext(frames) == STOP + UPSTREAM_DONE
    assert [w async for w in frames] == []


async def test_a_cut_mid_read_relays_the_complete_events_then_the_error_and_no_done() -> None:
    writes, finish = await _writes(ROLE + TOKENS[0], TOKENS[1] + TOKENS[2] + TOKENS[3][:25], cut=True)
    assert _texts(writes) == "t0 t1 t2 "
    assert writes[1] == TOKENS[1] + TOKENS[2]
    error = json.loads(_data(writes)[-1])["error"]
    assert error["code"] == "stream_interrupted" and DONE_FRAME not in b"".join(writes)
    assert [kind for kind, _, _ in finish.calls] == [FailureKind.TRANSPORT]


async def test_an_error_event_mid_read_ends_the_stream_after_the_events_before_it() -> None:
    error = _event({"error": {"message": "overloaded", "type": "server_error"}})
    writes, finish = await _writes(ROLE + TOKENS[0], TOKENS[1] + error + TOKENS[2] + STOP + UPSTREAM_DONE)
    assert _texts(writes) == "t0 t1 "
    last = json.loads(_data(writes)[-1])["error"]
    assert last["code"] == "upstream_error" and "overloaded" in last["message"]
    assert DONE_FRAME not in b"".join(writes)
    assert [kind for kind, _, _ in finish.calls] == [FailureKind.SERVER_ERROR]


async def test_usage_of_a_batched_stream_is_recorded_and_the_usage_chunk_kept_from_the_client() -> None:
    usage = _event({"id": "c1", "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 20}})
    writes, finish = await _writes(ROLE + b"".join(TOKENS) + STOP + usage + UPSTREAM_DONE)
    assert b"".join(writes) == ROLE + b"".join(TOKENS) + STOP + UPSTREAM_DONE
    assert finish.calls == [(FailureKind.SUCCESS, Usage(input_tokens=7, output_tokens=20), "")]


async def test_closing_a_finished_stream_leaves_no_reader_suspended() -> None:
    stream, finish = await _open(Reads(ROLE + TOKENS[0], STOP + UPSTREAM_DONE))
    frames = relay(stream, finish=finish, include_usage=False, stall_timeout_s=None, request_id="r")
    assert [w async for w in frames]
    # the events' generators ran to their end (no finalizer task for the event loop to schedule)
    assert stream.events.ag_frame is None
