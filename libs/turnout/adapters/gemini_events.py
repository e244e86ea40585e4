"""Gemini stream events -> OpenAI `chat.completion.chunk` objects (pure).

Owns: `GeminiChunks`, the state of one `streamGenerateContent?alt=sse` stream, which turns
each event's `GenerateContentResponse` into the OpenAI chunks the relay forwards.
Must not import: httpx, services, FastAPI, arq; no I/O, no clock.

Source: https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent —
every event's data is a whole `GenerateContentResponse` holding the next piece of the first
candidate (`content.parts`: text deltas, whole `functionCall`s), the last one its
`finishReason` and the `usageMetadata` (cumulative on every event); the body then ends (no
end marker). An `{"error": {...}}` object may come instead of a response.

Mapping:

| Gemini event | OpenAI chunk(s) |
| --- | --- |
| the first event | `{"delta": {"role": "assistant", "content": ""}}` first |
| a text part (not a thought) | `{"delta": {"content": text}}` |
| a `functionCall` part | `tool_calls[{index, id, type, function: {name, arguments}}]`, whole |
| `finishReason` | the finish chunk and a usage-only chunk (`choices: []`); the stream has ended |
| `promptFeedback.blockReason`, or a safety finish before any content | `StreamBlocked` |
| `{"error": {...}}` | `StreamError` |
"""

from __future__ import annotations

from typing import Any

from turnout.adapters.anthropic_events import StreamError, chat_chunk
from turnout.adapters.gemini_wire import blocked, finish_reason, first_candidate, openai_usage, parts_of, tool_call
from turnout.adapters.google_errors import google_error_fields


class StreamBlocked(Exception):
    """The answer was blocked by a safety filter before any content (a content-policy failure)."""


class GeminiChunks:
    """Feeds Gemini stream events, returns OpenAI chunks; one instance per stream.

    Args:
        created_s: `created` of every chunk, integer epoch seconds.
        model: the model name until a response names one (`modelVersion`).
    """

    def __init__(self, *, created_s: int, model: str = "") -> None:
        self._created_s = created_s
        self._model = model
        self._id = ""
        self._started = False
        self._content = False
        self._calls = 0

    def _chunk(self, delta: dict[str, Any] | None, finish: str | None = None) -> dict[str, Any]:
        return chat_chunk(self._id, self._created_s, self._model, delta, finish)

    def feed(self, data: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
        """Translate one event's data.

        Returns:
            The OpenAI chunks to emit (possibly none), and whether the stream ended cleanly
            with this event (its `finishReason` came: the chunks end with the finish and the
            usage-only chunk).

        Raises:
            StreamError: an error object (its `status` as the type).
            StreamBlocked: a safety block before any content.
        """
        error = google_error_fields(data)
        if error is not None:
            raise StreamError(error[0], error[1])
        if not self._content:
            reason = blocked(data)
            if reason is not None:
                raise StreamBlocked(reason)
        response_id = str(data.get("responseId") or "")
        self._id = self._id or (f"chatcmpl-{response_id}" if response_id else "chatcmpl-gemini")
        self._model = str(data.get("modelVersion") or self._model)
        out: list[dict[str, Any]] = []
        if not self._started:
            self._started = True
            out.append(self._chunk({"role": "assistant", "content": ""}))
        candidate = first_candidate(data)
        for part in parts_of(candidate):
            call = tool_call(part, response_id, self._calls)
            if call is not None:
                out.append(self._chunk({"tool_calls": [{"index": self._calls, **call}]}))
                self._calls += 1
                self._content = True
            elif part.get("text"):
                out.append(self._chunk({"content": str(part["text"])}))
                self._content = True
        reason = candidate.get("finishReason")
        if reason:
            tally = {**self._chunk(None), "choices": [], "usage": openai_usage(data.get("usageMetadata"))}
            out += [self._chunk({}, finish_reason(reason, self._calls > 0)), tally]
            return out, True
        return out, False
