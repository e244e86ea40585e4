"""Anthropic streaming events -> OpenAI `chat.completion.chunk` objects (pure).

Owns: `ChunkTranslator`, the state machine that turns Anthropic's named SSE
events into the OpenAI chunks the relay forwards, so the relay and the
client-facing code stay format-agnostic.
Must not import: httpx, services, FastAPI, arq; no I/O, no clock.

Source: https://docs.anthropic.com/en/docs/build-with-claude/streaming —
`message_start` (id, model, input usage) → per content block
`content_block_start` / `content_block_delta` (`text_delta`,
`input_json_delta`, `thinking_delta`, ...) / `content_block_stop` →
`message_delta` (`stop_reason`, cumulative usage) → `message_stop`; `ping`
anywhere; `error` (`{"type": "error", "error": {"type", "message"}}`).

Mapping:

| Anthropic event | OpenAI chunk(s) |
| --- | --- |
| `message_start` | `{"delta": {"role": "assistant", "content": ""}}` |
| `content_block_start` text (non-empty text) | a content delta |
| `content_block_start` tool_use | `tool_calls[{index, id, type, function: {name, arguments: ""}}]` |
| `text_delta` | `{"delta": {"content": text}}` (empty text: nothing) |
| `input_json_delta` | `tool_calls[{index, function: {arguments: partial_json}}]` |
| `message_delta` | the finish chunk, then a usage-only chunk (`choices: []`) |
| `message_stop` | `DONE` |
| `ping`, `content_block_stop`, thinking / signature deltas | nothing |
| `error` | raised as `StreamError` (the caller decides: failed attempt or final error event) |
"""

from __future__ import annotations

from typing import Any, Final

from turnout.adapters.anthropic_wire import finish_reason, openai_usage

DONE: Final = "[DONE]"
"""Returned by `feed` when the stream ended cleanly (`message_stop`)."""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def openai_chunk(
    chunk_id: str, created_s: int, model: str, delta: dict[str, Any] | None, finish: str | None = None
) -> dict[str, Any]:
    """One OpenAI `chat.completion.chunk` of choice 0 (`created` in integer epoch seconds)."""
    return {
        "id": chunk_id,
        "object": "chat.completion.chunk",
        "created": created_s,
        "model": model,
        "choices": [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}],
    }


class StreamError(Exception):
    """An Anthropic `error` event (or an unusable event).

    Attributes:
        error_type: the Anthropic error type (`overloaded_error`, ...), or None.
        message: the provider's message.
    """

    def __init__(self, error_type: str | None, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message


class ChunkTranslator:
    """Feeds Anthropic events, returns OpenAI chunks; one instance per stream.

    Args:
        created_s: `created` of every chunk, integer epoch seconds.
        model: the model name used until `message_start` names one.
    """

    def __init__(self, *, created_s: int, model: str = "") -> None:
        self._created_s = created_s
        self._id = ""
        self._model = model
        self._usage: dict[str, Any] = {}
        self._tools: dict[int, int] = {}  # Anthropic block index -> OpenAI tool call index

    def _chunk(self, delta: dict[str, Any] | None, finish: str | None = None) -> dict[str, Any]:
        return openai_chunk(self._id, self._created_s, self._model, delta, finish)

    def _tool_delta(self, block_index: int, call: dict[str, Any]) -> dict[str, Any]:
        return self._chunk({"tool_calls": [{"index": self._tools[block_index], **call}]})

    def feed(self, event: str, data: dict[str, Any]) -> list[dict[str, Any]] | str:
        """Translate one event.

        Args:
            event: the SSE event name (falls back to `data["type"]`).
            data: the event's decoded JSON data.

        Returns:
            The OpenAI chunks to emit (possibly none), or `DONE` after
            `message_stop`.

        Raises:
            StreamError: an `error` event.
        """
        kind = data.get("type") if event in ("", "message") else event
        if kind == "error":
            err = _dict(data.get("error"))
            etype = err.get("type")
            raise StreamError(etype if isinstance(etype, str) else None, str(err.get("message", "")))
        if kind == "message_start":
            message = _dict(data.get("message"))
            self._id = str(message.get("id", self._id))
            self._model = str(message.get("model") or self._model)
            if isinstance(message.get("usage"), dict):
                self._usage = dict(_dict(message.get("usage")))
            return [self._chunk({"role": "assistant", "content": ""})]
        if kind == "content_block_start":
            block = _dict(data.get("content_block"))
            index = int(data.get("index") or 0)
            if block.get("type") == "tool_use":
                self._tools[index] = len(self._tools)
                call = {
                    "id": block.get("id", ""),
                    "type": "function",
                    "function": {"name": block.get("name", ""), "arguments": ""},
                }
                return [self._tool_delta(index, call)]
            if block.get("type") == "text" and block.get("text"):
                return [self._chunk({"content": block["text"]})]
            return []
        if kind == "content_block_delta":
            delta = _dict(data.get("delta"))
            index = int(data.get("index") or 0)
            if delta.get("type") == "text_delta" and delta.get("text"):
                return [self._chunk({"content": delta["text"]})]
            if delta.get("type") == "input_json_delta" and index in self._tools and delta.get("partial_json"):
                return [self._tool_delta(index, {"function": {"arguments": delta["partial_json"]}})]
            return []
        if kind == "message_delta":
            delta = _dict(data.get("delta"))
            usage = data.get("usage")
            if isinstance(usage, dict):  # cumulative: overwrite what message_start said
                self._usage.update({k: v for k, v in usage.items() if v is not None})
            if not delta.get("stop_reason"):
                return []
            tally = {**self._chunk(None), "choices": [], "usage": openai_usage(self._usage)}
            return [self._chunk({}, finish_reason(delta.get("stop_reason"))), tally]
        if kind == "message_stop":
            return DONE
        return []  # ping, content_block_stop, unknown future events
