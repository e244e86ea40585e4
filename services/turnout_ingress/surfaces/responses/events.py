"""Responses-format streams: the relay's OpenAI chat chunks -> Responses API events.

Owns: `EventSequencer` (pure: `chat.completion.chunk` objects in, numbered Responses
events out) and `responses_stream`, which wraps the relay's byte frames for a
`/v1/responses` client and hands the finished Response to a keeper before its last event.
Must not import: FastAPI, starlette, Redis.

Sequence produced (https://platform.openai.com/docs/api-reference/responses-streaming and
the `openai` SDK's `ResponseStreamEvent` union), every event framed
`event: <type>\\ndata: {..., "type": <type>, "sequence_number": n}` with n = 0, 1, 2, ...:
`response.created`, `response.in_progress` (with the first chunk); per output item
`response.output_item.added`, then for a message `response.content_part.added`, the
`response.output_text.delta` events, `response.output_text.done`,
`response.content_part.done`, for a function call the
`response.function_call_arguments.delta` events and `.done`; then
`response.output_item.done`; last `response.completed` (or `response.incomplete`) with the
whole Response, usage included. An item is closed when another begins (chat streams send
tool calls one after another). A relay error frame (the stream broke after its commit
point) closes nothing more: `response.failed` with `error: {code, message}` ends the
stream, as OpenAI ends a failed response. The stream never sends `[DONE]` (OpenAI's
Responses streams do not).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec

from turnout_ingress.surfaces.messages.events import sse
from turnout_ingress.surfaces.responses.answer import call_item, message_item, obj, response_object, status_of, usage_of

_decode = msgspec.json.Decoder()
Keeper = Callable[[dict[str, Any]], Awaitable[None]]
"""Called with the finished Response before its last event is sent (the conversation store)."""
BROKEN = "The upstream stream ended before the answer was complete."


class EventSequencer:
    """Feeds chat chunks, returns numbered Responses events; one instance per stream.

    Args:
        request_id: the gateway's request id (ids of the Response and its items).
        created_at: epoch seconds the request arrived.
        model: the requested model, named until a chunk names the serving one.
        echo: the request fields the Response echoes (`request.ResponsesCall.echo`).
    """

    def __init__(self, *, request_id: str, created_at: int, model: str, echo: dict[str, Any]) -> None:
        self._rid, self._created, self._model, self._echo = request_id, created_at, model, echo
        self._seq = 0
        self._started = False
        self._output: list[dict[str, Any]] = []  # items, each final once closed
        self._open: dict[str, Any] | None = None  # the item being streamed
        self._calls: dict[int, dict[str, Any]] = {}  # chat tool call index -> its item
        self._finish: Any = None
        self._usage: Any = None
        self.final: dict[str, Any] | None = None
        """The finished Response (after `done`), else None."""

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, **fields, "sequence_number": self._seq}
        self._seq += 1
        return event

    def _response(self, status: str, **extra: Any) -> dict[str, Any]:
        return response_object(
            request_id=self._rid,
            created_at=self._created,
            model=self._model,
            status=status,
            output=list(self._output),
            echo=self._echo,
            usage=None,
            **extra,
        )

    def _start(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        if self._started:
            return []
        self._started = True
        if isinstance(chunk.get("model"), str) and chunk["model"]:
            self._model = chunk["model"]
        start = self._response("in_progress")
        return [
            self._event("response.created", response=start),
            self._event("response.in_progress", response=start),
        ]

    def _close(self) -> list[dict[str, Any]]:
        item, self._open = self._open, None
        if item is None:
            return []
        index = self._output.index(item)
        where = {"item_id": item["id"], "output_index": index}
        events = []
        if item["type"] == "message":
            part = item["content"][0]
            events.append(
                self._event("response.output_text.done", **where, content_index=0, text=part["text"], logprobs=[])
            )
            events.append(self._event("response.content_part.done", **where, content_index=0, part=dict(part)))
        else:
            item["status"] = "completed"
            events.append(
                self._event(
                    "response.function_call_arguments.done", **where, name=item["name"], arguments=item["arguments"]
                )
            )
        return events + [self._event("response.output_item.done", output_index=index, item=_copy(item))]

    def _begin(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        events = self._close()
        self._open = item
        self._output.append(item)
        added = _copy(item)
        if item["type"] == "message":
            added["content"], added["status"] = [], "in_progress"
        else:
            added["status"] = "in_progress"
        return events + [self._event("response.output_item.added", output_index=len(self._output) - 1, item=added)]

    def _open_message(self) -> list[dict[str, Any]]:
        """Begin a message item and its one `output_text` part (ids `msg_<rid>`, then `msg_<rid>_<n>`)."""
        item = message_item(f"{self._rid}_{len(self._output)}" if self._output else self._rid, "")
        events = self._begin(item)
        where = {"item_id": item["id"], "output_index": len(self._output) - 1}
        return events + [
            self._event("response.content_part.added", **where, content_index=0, part=dict(item["content"][0]))
        ]

    def _text(self, text: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        if self._open is None or self._open["type"] != "message":
            events += self._open_message()
        item = self._open
        assert item is not None  # just begun, or already open
        item["content"][0]["text"] += text
        where = {"item_id": item["id"], "output_index": self._output.index(item)}
        return events + [self._event("response.output_text.delta", **where, content_index=0, delta=text, logprobs=[])]

    def _call(self, call: dict[str, Any]) -> list[dict[str, Any]]:
        fn = obj(call.get("function"))
        number = int(call.get("index") or 0)
        events: list[dict[str, Any]] = []
        item = self._calls.get(number)
        if item is None:
            name = str(fn.get("name") or "")
            item = call_item(self._rid, len(self._calls), str(call.get("id") or ""), name, "", self._echo.get("tools"))
            self._calls[number] = item
            events += self._begin(item)
        fragment = fn.get("arguments")
        if isinstance(fragment, str) and fragment:
            item["arguments"] += fragment
            if item is self._open:  # a late fragment of a closed call reaches only the final Response
                where = {"item_id": item["id"], "output_index": self._output.index(item)}
                events.append(self._event("response.function_call_arguments.delta", **where, delta=fragment))
        return events

    def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        """The events for one chat chunk (`response.created` and `.in_progress` come with the first)."""
        events = self._start(chunk)
        if isinstance(chunk.get("usage"), dict):
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = obj(choice.get("delta"))
            if isinstance(delta.get("content"), str) and delta["content"]:
                events += self._text(delta["content"])
            for call in delta.get("tool_calls") or []:
                if isinstance(call, dict):
                    events += self._call(call)
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
        return events

    def done(self) -> list[dict[str, Any]]:
        """The closing events after the chat stream's `[DONE]`: the open item closed, then
        `response.completed` (or `response.incomplete`) with the whole Response (`final`)."""
        events = self._start({})
        if not self._output:  # an answer with no content still has its (empty) message
            events += self._open_message()
        events += self._close()
        status, details = status_of(self._finish)
        if status == "incomplete":
            for item in self._output:
                if item["type"] == "message":
                    item["status"] = "incomplete"
        self.final = {**self._response(status, incomplete_details=details), "usage": usage_of(self._usage)}
        return events + [self._event(f"response.{status}", response=self.final)]

    def failed(self, message: str, code: str | None) -> list[dict[str, Any]]:
        """The `response.failed` event that ends a broken stream (`error.code` the relay's, else `server_error`)."""
        events = self._start({})
        for item in self._output:  # what was begun and not finished is cut short
            if item is self._open or item.get("status") == "in_progress":
                item["status"] = "incomplete"
        error = {"code": code or "server_error", "message": message}
        return events + [self._event("response.failed", response=self._response("failed", error=error))]


def _copy(item: dict[str, Any]) -> dict[str, Any]:
    """`item` with its content parts copied (events must not change when the item grows)."""
    return {**item, **({"content": [dict(p) for p in item["content"]]} if "content" in item else {})}


def _frame(event: dict[str, Any]) -> bytes:
    return sse(str(event["type"]), event)


async def responses_stream(
    frames: AsyncIterable[Any], sequencer: EventSequencer, keep: Keeper | None = None
) -> AsyncIterator[bytes]:
    """The Responses SSE bytes for the relay's OpenAI chat frames.

    Args:
        frames: the relay's body iterator (bytes; a piece may hold several frames and a
            frame may span pieces); it ends with `data: [DONE]` or an error frame.
        sequencer: this stream's `EventSequencer`.
        keep: awaited with the finished Response before its last event (`response.completed`
            or `.incomplete`) is sent, so a follow-up sent on seeing it finds it stored; its
            errors are its own to handle (it must not raise). Not called for a failed stream.

    Yields:
        The events of each piece of `frames` in one write; ends after the last event.
    """
    buffer = b""
    try:
        async for piece in frames:
            buffer += piece if isinstance(piece, bytes) else str(piece).encode()
            out: list[bytes] = []
            while b"\n\n" in buffer:
                frame, buffer = buffer.split(b"\n\n", 1)
                data = _data_of(frame)
                if not data:
                    continue
                if data == "[DONE]":
                    closing = sequencer.done()
                    if keep is not None and sequencer.final is not None:
                        await keep(sequencer.final)
                    yield b"".join(out + [_frame(e) for e in closing])
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
                    failed = sequencer.failed(str(error.get("message", "")), error.get("code"))
                    yield b"".join(out + [_frame(e) for e in failed])
                    await _drain(frames)
                    return
                out += [_frame(e) for e in sequencer.feed(chunk)]
            if out:
                yield b"".join(out)
        yield b"".join(_frame(e) for e in sequencer.failed(BROKEN, None))
    finally:
        close = getattr(frames, "aclose", None)
        if close is not None:
            await close()  # a no-op after the relay's end; a client gone mid-stream cancels it


def _data_of(frame: bytes) -> str | None:
    for line in frame.decode("utf-8", "replace").splitlines():
        if line.startswith("data:"):
            return line[5:].strip()
    return None


async def _drain(frames: AsyncIterable[Any]) -> None:
    """Run the relay to its own end, so it records the attempt's real outcome."""
    async for _ in frames:
        pass
