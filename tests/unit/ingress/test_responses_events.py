"""Chat chunks -> Responses events (`turnout_ingress.surfaces.responses.events`): the order official clients
parse, sequence numbers from 0 without a gap, every item added is done, and the final Response
equals what the non-streamed path answers for the same content."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from turnout_ingress.surfaces.responses.answer import to_response
from turnout_ingress.surfaces.responses.events import EventSequencer, responses_stream
from turnout_ingress.surfaces.responses.request import translate_request

ECHO = translate_request({"model": "m", "input": "hi"}).echo


def _chunk(delta: dict[str, Any] | None = None, finish: str | None = None, usage: Any = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk", "model": "served", "choices": []}
    if delta is not None or finish is not None:
        chunk["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def _sequencer() -> EventSequencer:
    return EventSequencer(request_id="r", created_at=5, model="m", echo=ECHO)


def _run(chunks: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], EventSequencer]:
    sequencer = _sequencer()
    events = [e for c in chunks for e in sequencer.feed(c)] + sequencer.done()
    return events, sequencer


def _check_invariants(events: list[dict[str, Any]]) -> None:
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events[:2]] == ["response.created", "response.in_progress"]
    added = [e["item"]["id"] for e in events if e["type"] == "response.output_item.added"]
    done = [e["item"]["id"] for e in events if e["type"] == "response.output_item.done"]
    assert added == done
    opened = {e["item_id"] for e in events if e["type"] == "response.content_part.added"}
    assert opened == {e["item_id"] for e in events if e["type"] == "response.content_part.done"}
    assert events[-1]["type"] in ("response.completed", "response.incomplete")


def test_text_stream_event_order() -> None:
    usage = {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4}
    events, sequencer = _run(
        [
            _chunk({"role": "assistant", "content": ""}),
            _chunk({"content": "he"}),
            _chunk({"content": "llo"}),
            _chunk(finish="stop"),
            _chunk(usage=usage),
        ]
    )
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    _check_invariants(events)
    assert events[2]["item"] == {
        "id": "msg_r",
        "type": "message",
        "status": "in_progress",
        "role": "assistant",
        "content": [],
    }
    assert events[4] == {
        "type": "response.output_text.delta",
        "item_id": "msg_r",
        "output_index": 0,
        "content_index": 0,
        "delta": "he",
        "logprobs": [],
        "sequence_number": 4,
    }
    assert events[6]["text"] == "hello" and events[1]["response"]["status"] == "in_progress"
    final = events[-1]["response"]
    assert final == sequencer.final and final["usage"]["total_tokens"] == 4 and final["model"] == "served"


def test_text_then_a_function_call_closes_the_message_first() -> None:
    events, _ = _run(
        [
            _chunk({"content": "let me check"}),
            _chunk(
                {
                    "tool_calls": [
                        {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}
                    ]
                }
            ),
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a"'}}]}),
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}]}),
            _chunk(finish="tool_calls"),
        ]
    )
    kinds = [e["type"] for e in events]
    assert kinds[kinds.index("response.output_item.done") + 1] == "response.output_item.added"
    assert kinds[-4:] == [
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    done = events[-3]
    assert (done["arguments"], done["name"], done["item_id"], done["output_index"]) == ('{"a":1}', "f", "fc_r_0", 1)
    assert events[-2]["item"]["call_id"] == "call_1" and events[-2]["item"]["status"] == "completed"
    _check_invariants(events)


def test_a_cut_answer_ends_with_response_incomplete() -> None:
    events, sequencer = _run([_chunk({"content": "abc"}), _chunk(finish="length")])
    assert events[-1]["type"] == "response.incomplete"
    assert sequencer.final is not None and sequencer.final["incomplete_details"] == {"reason": "max_output_tokens"}
    _check_invariants(events)


def test_an_empty_answer_still_has_its_message() -> None:
    events, sequencer = _run([_chunk(finish="stop")])
    _check_invariants(events)
    assert sequencer.final is not None and sequencer.final["output"][0]["content"][0]["text"] == ""


def test_failed_ends_with_response_failed_carrying_the_error() -> None:
    sequencer = _sequencer()
    events = sequencer.feed(_chunk({"content": "a"})) + sequencer.failed("upstream reset", "stream_broken")
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["error"] == {"code": "stream_broken", "message": "upstream reset"}
    assert events[-1]["response"]["status"] == "failed" and sequencer.final is None


_PIECE = st.one_of(
    st.tuples(st.just("text"), st.text(min_size=1, max_size=5)),
    st.tuples(st.just("call"), st.text(max_size=5)),
)


@given(st.lists(_PIECE, max_size=12), st.sampled_from(["stop", "length", "tool_calls"]))
def test_any_stream_keeps_the_invariants_and_matches_the_completion(pieces: list[tuple[str, str]], finish: str) -> None:
    chunks: list[dict[str, Any]] = []
    text = ""
    calls: list[dict[str, Any]] = []
    for kind, value in pieces:
        if kind == "text":
            chunks.append(_chunk({"content": value}))
            text += value
        else:
            n = len(calls)
            calls.append({"id": f"call_{n}", "type": "function", "function": {"name": "f", "arguments": value}})
            call = {"index": n, "id": f"call_{n}", "type": "function", "function": {"name": "f", "arguments": value}}
            chunks.append(_chunk({"tool_calls": [call]}))
    chunks.append(_chunk(finish=finish))
    events, sequencer = _run(chunks)
    _check_invariants(events)
    assert sequencer.final is not None
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == text
    final_calls = [i for i in sequencer.final["output"] if i["type"] == "function_call"]
    assert [(c["call_id"], c["arguments"]) for c in final_calls] == [
        (c["id"], c["function"]["arguments"]) for c in calls
    ]
    if not any(kind == "text" for kind, _ in pieces) or all(kind == "text" for kind, _ in pieces):
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = calls
        completion = {"model": "served", "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
        queued = to_response(completion, request_id="r", created_at=5, echo=ECHO, model="m")
        assert [i["type"] for i in queued["output"]] == [i["type"] for i in sequencer.final["output"]]
        assert queued["status"] == sequencer.final["status"]


async def _frames(pieces: list[bytes]) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


def _sse(data: Any) -> bytes:
    return b"data: " + (data if isinstance(data, bytes) else json.dumps(data).encode()) + b"\n\n"


async def test_the_stream_keeps_the_response_before_its_last_event_and_frames_each_event() -> None:
    kept: list[dict[str, Any]] = []
    body = _sse(_chunk({"content": "hi"})) + _sse(_chunk(finish="stop")) + _sse(b"[DONE]")
    out: list[bytes] = []

    async def keep(response: dict[str, Any]) -> None:
        kept.append(response)
        assert not any(b"response.completed" in piece for piece in out)

    async for piece in responses_stream(_frames([body[:7], body[7:]]), _sequencer(), keep):
        out.append(piece)
    text = b"".join(out).decode()
    frames = [f for f in text.split("\n\n") if f]
    assert all(f.startswith("event: ") and "\ndata: " in f for f in frames)
    assert frames[-1].startswith("event: response.completed\n") and "[DONE]" not in text
    assert len(kept) == 1 and kept[0]["status"] == "completed"


async def test_an_error_frame_becomes_response_failed_and_nothing_is_kept() -> None:
    kept: list[dict[str, Any]] = []

    async def keep(response: dict[str, Any]) -> None:
        kept.append(response)

    error = {"error": {"message": "reset", "type": "upstream_error", "param": None, "code": "stream_broken"}}
    out = [
        p async for p in responses_stream(_frames([_sse(_chunk({"content": "a"})), _sse(error)]), _sequencer(), keep)
    ]
    assert b"event: response.failed" in out[-1] and kept == []


async def test_a_stream_that_just_ends_is_failed() -> None:
    out = [p async for p in responses_stream(_frames([_sse(_chunk({"content": "a"}))]), _sequencer())]
    assert out[-1].startswith(b"event: response.failed")
