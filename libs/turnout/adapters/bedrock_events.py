"""Bedrock ConverseStream events -> OpenAI `chat.completion.chunk` objects.

Owns: reading an `application/vnd.amazon.eventstream` body into `Frame`s (its messages
parsed by botocore's parser, `turnout.aws.eventstream`: a broken frame raises its
`ParserError`, a PROTOCOL failure of the exchange) and `EventTranslator`, the state machine that turns the stream's events into the
OpenAI chunks the relay forwards, so everything downstream stays format-agnostic.
Must not import: `turnout.adapters.exchange`, services, FastAPI, arq, botocore (`turnout.aws` does).

Source: https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html
and https://docs.aws.amazon.com/AmazonS3/latest/API/RESTSelectObjectAppendix.html (the
framing). Each message has `:message-type` `event` (`:event-type` names it, the payload
is its JSON) or `exception` (`:exception-type`, payload `{"message"}`) / `error`
(`:error-code`, `:error-message`).

| ConverseStream event | OpenAI chunk(s) |
| --- | --- |
| `messageStart` | `{"delta": {"role": "assistant", "content": ""}}` |
| `contentBlockStart` toolUse | `tool_calls[{index, id, type, function: {name, arguments: ""}}]` |
| `contentBlockDelta` text | `{"delta": {"content": text}}` (empty: nothing) |
| `contentBlockDelta` toolUse | `tool_calls[{index, function: {arguments: input}}]` |
| `messageStop` | the finish chunk (`stopReason` as `bedrock_wire.FINISH_REASON`) |
| `metadata` | a usage-only chunk (`choices: []`); the stream is `done` |
| `contentBlockStop`, reasoning deltas, unknown events | nothing |
| an exception / error message | raised as `StreamError` |

A body that ends after `messageStop` without `metadata` ends cleanly too (`finished`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Final

import msgspec

from turnout.adapters.anthropic_events import StreamError, chat_chunk
from turnout.adapters.bedrock_wire import finish_reason, openai_usage
from turnout.aws.eventstream import messages

EVENT_STREAM: Final = "application/vnd.amazon.eventstream"
"""The media type of a ConverseStream answer."""

_decode = msgspec.json.Decoder()


class Frame(msgspec.Struct, frozen=True):
    """One event-stream message: its `:event-type` (or exception type) and decoded payload.

    Attributes:
        kind: `:message-type` (`event`, `exception`, `error`).
        name: `:event-type`, `:exception-type` or `:error-code`.
        data: the JSON payload (an object; `{}` when empty or not an object).
    """

    kind: str
    name: str
    data: dict[str, Any]


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def frame_of(headers: dict[str, Any], payload: bytes) -> Frame:
    """A `Frame` for one parsed message's headers and payload (pure).

    An `error` message's `:error-message` header becomes `data["message"]`.

    Raises:
        msgspec.DecodeError: the payload is not JSON.
    """
    data: Any = _decode.decode(payload) if payload.strip() else {}
    data = data if isinstance(data, dict) else {}
    kind = _str(headers.get(":message-type")) or "event"
    if kind == "exception":
        return Frame(kind, _str(headers.get(":exception-type")), data)
    if kind == "error":
        return Frame(kind, _str(headers.get(":error-code")), {"message": _str(headers.get(":error-message"))})
    return Frame(kind, _str(headers.get(":event-type")), data)


async def frames(chunks: AsyncIterator[bytes]) -> AsyncIterator[list[Frame]]:
    """The messages of an event-stream body, one list per read that completed any.

    Args:
        chunks: the body's bytes as read (`httpx.Response.aiter_bytes`).

    Yields:
        Non-empty lists of `Frame`s in stream order. botocore's `ParserError` (a bad
        CRC, an impossible length: `turnout.aws.eventstream.messages`) and `msgspec.DecodeError` (a payload that is not
        JSON) propagate, as do the transport's exceptions. A partial message at the end
        of the body is dropped.
    """
    async for batch in messages(chunks):
        yield [frame_of(headers, payload) for headers, payload in batch]


class EventTranslator:
    """Feeds ConverseStream frames, returns OpenAI chunks; one instance per stream.

    Args:
        answer_id: every chunk's `id` (the `x-amzn-RequestId`).
        model: every chunk's `model` (the target's model id).
        created_s: `created` of every chunk, integer epoch seconds.
    """

    def __init__(self, *, answer_id: str, model: str, created_s: int) -> None:
        self._id = answer_id
        self._model = model
        self._created_s = created_s
        self._tools: dict[int, int] = {}  # contentBlockIndex -> OpenAI tool call index
        self.finished = False
        """`messageStop` has come: an end of the body now is a clean end."""
        self.done = False
        """`metadata` has come: the stream is over (`DONE` follows its usage chunk)."""

    def _chunk(self, delta: dict[str, Any] | None, finish: str | None = None) -> dict[str, Any]:
        return chat_chunk(self._id, self._created_s, self._model, delta, finish)

    def _tool_delta(self, index: int, call: dict[str, Any]) -> dict[str, Any]:
        return self._chunk({"tool_calls": [{"index": self._tools[index], **call}]})

    def _block(self, data: dict[str, Any], key: str) -> tuple[int, dict[str, Any]]:
        index = data.get("contentBlockIndex")
        block = data.get(key)
        return (index if isinstance(index, int) else 0), (block if isinstance(block, dict) else {})

    def feed(self, frame: Frame) -> list[dict[str, Any]]:
        """Translate one frame: the chunks to emit (possibly none); after `metadata`, `done`.

        Raises:
            StreamError: an exception or error message (its type, e.g. `throttlingException`,
                `modelStreamErrorException`, and its message).
        """
        if frame.kind != "event":
            raise StreamError(frame.name or None, _str(frame.data.get("message") or frame.data.get("Message")))
        data = frame.data
        if frame.name == "messageStart":
            return [self._chunk({"role": "assistant", "content": ""})]
        if frame.name == "contentBlockStart":
            index, start = self._block(data, "start")
            use = start.get("toolUse")
            if not isinstance(use, dict):
                return []
            self._tools[index] = len(self._tools)
            function = {"name": _str(use.get("name")), "arguments": ""}
            return [
                self._tool_delta(index, {"id": _str(use.get("toolUseId")), "type": "function", "function": function})
            ]
        if frame.name == "contentBlockDelta":
            index, delta = self._block(data, "delta")
            if delta.get("text"):
                return [self._chunk({"content": _str(delta["text"])})]
            use = delta.get("toolUse")
            if isinstance(use, dict) and index in self._tools and use.get("input"):
                return [self._tool_delta(index, {"function": {"arguments": _str(use["input"])}})]
            return []
        if frame.name == "messageStop":
            self.finished = True
            return [self._chunk({}, finish_reason(data.get("stopReason")))]
        if frame.name == "metadata":
            self.done = True
            return [{**self._chunk(None), "choices": [], "usage": openai_usage(data.get("usage"))}]
        return []
