"""Anthropic-format streams: the relay's OpenAI frames -> Anthropic SSE events.

Owns: `EventTranslator` (pure: OpenAI `chat.completion.chunk` objects in,
Anthropic named events out) and `anthropic_stream`, which wraps the relay's
byte frames for a `/v1/messages` client.
Must not import: FastAPI, starlette, Redis.

Sequence produced (https://docs.anthropic.com/en/docs/build-with-claude/streaming):
`message_start` (usage unknown yet: zeros) → per block `content_block_start`
/ `content_block_delta` (`text_delta`, `input_json_delta`) /
`content_block_stop` → `message_delta` (`stop_reason`, the usage of the
final usage chunk, input tokens included) → `message_stop`. A relay error
frame (the stream broke after its commit point) becomes one `error` event
(`api_error`, or `timeout_error` for a stall) and the stream ends without
`message_stop`, as Anthropic ends a broken stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import msgspec

from turnout_ingress.surfaces.messages.wire import STOP_REASON, anthropic_usage, message_id

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()

Event = tuple[str, dict[str, Any]]
"""(event name, data object)."""


def sse(event: str, data: dict[str, Any]) -> bytes:
    """One named SSE event: `event: <name>\\ndata: <json>\\n\\n`."""
    return b"event: " + event.encode() + b"\ndata: " + _encode.encode(data) + b"\n\n"


class EventTranslator:
    """Feeds OpenAI chunks, returns Anthropic events; one instance per stream.

    Args:
        model: the model named in `message_start` until a chunk names one.
    """

    def __init__(self, *, model: str) -> None:
        self._model = model
        self._started = False
        self._open: int | None = None  # index of the open content block
        self._open_kind = ""
        self._next = 0
        self._tools: dict[int, int] = {}  # OpenAI tool call index -> block index
        self._stop = "end_turn"
        self._usage: dict[str, Any] = {}

    def _start(self, chunk: dict[str, Any]) -> list[Event]:
        if self._started:
            return []
        self._started = True
        message: dict[str, Any] = {
            "id": message_id(str(chunk.get("id") or "")),
            "type": "message",
            "role": "assistant",
            "model": str(chunk.get("model") or self._model),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return [("message_start", {"type": "message_start", "message": message})]

    def _close(self) -> list[Event]:
        if self._open is None:
            return []
        index, self._open = self._open, None
        return [("content_block_stop", {"type": "content_block_stop", "index": index})]

    def _begin(self, kind: str, block: dict[str, Any]) -> list[Event]:
        events = self._close()
        self._open, self._open_kind = self._next, kind
        self._next += 1
        return events + [
            ("content_block_start", {"type": "content_block_start", "index": self._open, "content_block": block})
        ]

    def feed(self, chunk: dict[str, Any]) -> list[Event]:
        """The events for one OpenAI chunk (`message_start` comes with the first)."""
        events = self._start(chunk)
        if isinstance(chunk.get("usage"), dict):
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            delta = delta if isinstance(delta, dict) else {}
            if delta.get("content"):
                if self._open is None or self._open_kind != "text":
                    events += self._begin("text", {"type": "text", "text": ""})
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": self._open,
                            "delta": {"type": "text_delta", "text": delta["content"]},
                        },
                    )
                )
            for call in delta.get("tool_calls") or []:
                fn = call.get("function") or {}
                number = int(call.get("index") or 0)
                if number not in self._tools:
                    block = {"type": "tool_use", "id": call.get("id", ""), "name": fn.get("name", ""), "input": {}}
                    events += self._begin("tool_use", block)
                    self._tools[number] = self._next - 1
                if fn.get("arguments"):
                    events.append(
                        (
                            "content_block_delta",
                            {
                                "type": "content_block_delta",
                                "index": self._tools[number],
                                "delta": {"type": "input_json_delta", "partial_json": fn["arguments"]},
                            },
                        )
                    )
            if choice.get("finish_reason"):
                self._stop = STOP_REASON.get(str(choice["finish_reason"]), "end_turn")
        return events

    def done(self) -> list[Event]:
        """The closing events after `[DONE]`: open block stop, `message_delta`, `message_stop`."""
        events = self._start({}) + self._close()
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": self._stop, "stop_sequence": None},
            "usage": anthropic_usage(self._usage),
        }
        return events + [("message_delta", delta), ("message_stop", {"type": "message_stop"})]

    def error(self, message: str, code: str | None) -> list[Event]:
        """The `error` event that ends a broken stream."""
        etype = "timeout_error" if code == "stream_stalled" else "api_error"
        return [("error", {"type": "error", "error": {"type": etype, "message": message}})]


def _data_of(frame: bytes) -> str | None:
    for line in frame.decode("utf-8", "replace").splitlines():
        if line.startswith("data:"):
            return line[5:].strip()
    return None


async def _drain(frames: AsyncIterable[Any]) -> None:
    """Run the relay to its own end, so it records the attempt's real outcome
    (closing it early would record a cancellation)."""
    async for _ in frames:
        pass


def _events_bytes(events: list[Event]) -> bytes:
    return b"".join([sse(*event) for event in events])


async def anthropic_stream(frames: AsyncIterable[Any], *, model: str) -> AsyncIterator[bytes]:
    """The Anthropic SSE bytes for the relay's OpenAI frames.

    Args:
        frames: the relay's body iterator (bytes; a piece may hold several
            frames `data: ...\n\n`, and a frame may span pieces).
        model: the requested model (until the upstream names the served one).

    Yields:
        Anthropic named events, the events of one piece of `frames` in one
        write; ends after `message_stop` or an `error` event.
    """
    translator = EventTranslator(model=model)
    buffer = b""
    try:
        async for piece in frames:
            buffer += piece if isinstance(piece, bytes) else str(piece).encode()
            events: list[Event] = []
            while b"\n\n" in buffer:
                frame, buffer = buffer.split(b"\n\n", 1)
                data = _data_of(frame)
                if not data:
                    continue
                if data == "[DONE]":
                    yield _events_bytes(events + translator.done())
                    await _drain(frames)
                    return
                try:
                    chunk = _decode.decode(data)
                except msgspec.DecodeError:
                    continue
                if not isinstance(chunk, dict):
                    continue
                error = chunk.get("error")
                if isinstance(error, dict):
                    yield _events_bytes(events + translator.error(str(error.get("message", "")), error.get("code")))
                    await _drain(frames)
                    return
                events += translator.feed(chunk)
            if events:
                yield _events_bytes(events)
        yield _events_bytes(translator.error("the upstream stream ended before the answer was complete", None))
    finally:
        close = getattr(frames, "aclose", None)
        if close is not None:
            await close()  # a no-op after the relay's end; a client gone mid-stream cancels it
