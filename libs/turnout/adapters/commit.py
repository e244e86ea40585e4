"""The commit point of a stream (SPEC §8), the same for every API family.

Owns: reading a stream's OpenAI-shaped events (`ApiFamily.stream_events`)
until the first content — text, refusal, tool calls, or a finish — and
turning everything that comes before it into an ordinary failed attempt:
an error envelope or `error` event (`error_outcome`), malformed data,
or an end without content. At the commit point the open response and the
frames held so far become an `UpstreamStream` for the relay.
Must not import: the family modules, services, FastAPI, arq.

Wire format: https://platform.openai.com/docs/api-reference/chat-streaming
(`data: {chunk}` events, `data: [DONE]`).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, Final

import httpx
import msgspec
from httpx_sse import ServerSentEvent

from turnout.adapters.base import AttemptResult, UpstreamStream, envelope_outcome
from turnout.core.types import Outcome, TransportError

_decode = msgspec.json.Decoder()

DONE: Final = "[DONE]"
"""The data of the event that ends an OpenAI-shaped stream."""


def is_content(chunk: dict[str, Any]) -> bool:
    """True when a chunk carries content: text, refusal, tool calls, or a finish (chat chunks:
    in `delta`; legacy completions chunks: `text`).

    Role-only deltas, empty content and usage-only chunks are not content.
    """
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        return False
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        if choice.get("finish_reason") or choice.get("text"):  # `text`: a legacy completions chunk
            return True
        delta = choice.get("delta")
        if isinstance(delta, dict) and any(delta.get(k) for k in ("content", "refusal", "tool_calls", "function_call")):
            return True
    return False


def error_outcome(data: dict[str, Any], headers: httpx.Headers) -> Outcome:
    """The outcome of an error envelope found inside a 200 stream (SPEC §3)."""
    return envelope_outcome(200, data, headers, time.time())


async def until_commit(
    response: httpx.Response, events: AsyncIterator[list[ServerSentEvent]], *, stream_end: str
) -> AttemptResult:
    """Read `events` up to the first content (SPEC §8).

    Args:
        response: the open SSE response the events come from.
        events: its OpenAI-shaped events, one list per read (`ApiFamily.stream_events`).
        stream_end: the family's end marker, named when the stream ends early.

    Returns:
        Committed: `stream` is an `UpstreamStream` holding the response, the
        frames read so far, the events that came after the first content in
        the same read (`pending`) and the rest of `events` (`done` when
        `[DONE]` came before any content). Otherwise a failed attempt: RESET
        when the events end first, PROTOCOL for undecodable or non-object
        data, the error's own type for an error envelope or `error` event.
        Transport exceptions propagate (`turnout.adapters.exchange` maps them).
    """
    held: list[str] = []
    while True:
        try:
            batch = await anext(events)
        except StopAsyncIteration:
            return AttemptResult(
                outcome=Outcome(
                    transport=TransportError.RESET,
                    message=f"upstream stream ended before any content or {stream_end}",
                )
            )
        for position, sse in enumerate(batch):
            data = sse.data
            if data.strip() == DONE:
                return AttemptResult(outcome=Outcome(status=200), stream=UpstreamStream(response, events, held, True))
            if not data.strip():
                continue  # comments and keep-alives
            try:
                chunk = _decode.decode(data)
            except msgspec.DecodeError:
                return AttemptResult(
                    outcome=Outcome(
                        status=200,
                        transport=TransportError.PROTOCOL,
                        message="malformed SSE data before the first content",
                    )
                )
            if not isinstance(chunk, dict):
                return AttemptResult(
                    outcome=Outcome(
                        status=200,
                        transport=TransportError.PROTOCOL,
                        message="SSE data is not a JSON object",
                    )
                )
            if sse.event == "error" or chunk.get("error"):
                return AttemptResult(outcome=error_outcome(chunk, response.headers))
            held.append(data)
            if is_content(chunk):
                stream = UpstreamStream(response, events, held, False, pending=batch[position + 1 :])
                return AttemptResult(outcome=Outcome(status=200), stream=stream)
