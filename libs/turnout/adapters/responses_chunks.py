"""OpenAI Responses stream events -> OpenAI `chat.completion.chunk` data, for the gateway's own accounting.

Owns: `ChunkTranslator`, which reads the events of a native `/v1/responses` stream (the
client's events, relayed as sent: `turnout.adapters.base.NativeFrames`) and gives the chat
chunks the rest of the gateway reads on every stream — the commit point (the first text,
refusal or function call: `turnout.adapters.commit.is_content`), the finish, the usage and
errors — and `usage_of`, a Response's token counts. Pure: no I/O, no clock (`created_s` is
given).
Must not import: `turnout.adapters.exchange`, services, FastAPI, arq.

The translation (events not listed give no chunk; their frames still go to the client):

| Responses event | chat chunk |
| --- | --- |
| `response.created` | a role-only opening chunk (`delta.role: assistant`: not content) |
| `response.output_text.delta` | `delta.content` |
| `response.refusal.delta` | `delta.refusal` |
| `response.output_item.added` of a `function_call` | a tool call opened: `index` (0, 1, ... in order), `id` (its `call_id`), `function.name`, empty arguments |
| `response.function_call_arguments.delta` | that tool call's `function.arguments` piece |
| `response.completed` | `finish_reason` `tool_calls` (a function call was made) or `stop`, then a usage chunk, then the end |
| `response.incomplete` | `finish_reason` `length` (`max_output_tokens`), `content_filter`, else `stop`; usage; the end |
| `response.failed`, `error` | a stream error (`StreamError`): its `code` as type and code, its message |

Built-in tool calls (`web_search_call`, `file_search_call`, ...) and reasoning give no chunk:
they are not content the gateway can continue or count, and the provider's events carry them.
Sources: https://platform.openai.com/docs/api-reference/responses-streaming and the
`openai` SDK's `ResponseStreamEvent` union (openai/types/responses).
"""

from __future__ import annotations

from typing import Any, Final

DONE: Final = "done"
"""What `ChunkTranslator.feed` returns for the event that ends the stream (after its chunks)."""


class StreamError(Exception):
    """A Responses stream reported a failure (`response.failed`, or an `error` event).

    Attributes:
        error_type: the provider's error code used as its type (`server_error`,
            `rate_limit_exceeded`, ...), `server_error` when it gave none.
        message: the provider's message.
    """

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message


def usage_of(usage: Any) -> tuple[int, int]:
    """(input tokens, output tokens) of a Response's `usage` (`input_tokens`, `output_tokens`);
    (0, 0) when absent or malformed. Cached input tokens are part of `input_tokens` (OpenAI)."""
    if not isinstance(usage, dict):
        return 0, 0
    counts = [usage.get("input_tokens"), usage.get("output_tokens")]
    ints = [c if isinstance(c, int) and not isinstance(c, bool) and c >= 0 else 0 for c in counts]
    return ints[0], ints[1]


def _failure(data: dict[str, Any]) -> StreamError:
    """The `StreamError` of a `response.failed` (its `response.error`) or an `error` event."""
    response = data.get("response")
    err = response.get("error") if isinstance(response, dict) else data
    if not isinstance(err, dict):
        err = {}
    code, message = err.get("code"), err.get("message")
    return StreamError(
        code if isinstance(code, str) and code else "server_error",
        message if isinstance(message, str) and message else "the provider's response failed",
    )


_INCOMPLETE: Final = {"max_output_tokens": "length", "content_filter": "content_filter"}
"""`incomplete_details.reason` -> the chat finish reason."""


class ChunkTranslator:
    """Translates one Responses stream's events, in order, into chat chunks (module doc).

    Args:
        created_s: the chunks' `created`, epoch seconds.
    """

    def __init__(self, *, created_s: int) -> None:
        self._created_s = created_s
        self._id = ""
        self._model = ""
        self._calls: dict[str, int] = {}  # function_call item id (or output index) -> tool call index

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self._created_s,
            "model": self._model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def _call_index(self, data: dict[str, Any]) -> int | None:
        key = data.get("item_id")
        if isinstance(key, str) and key in self._calls:
            return self._calls[key]
        return self._calls.get(f"#{data.get('output_index')}")

    def feed(self, data: dict[str, Any]) -> list[dict[str, Any]] | str:
        """The chunks of one event's data (a JSON object), or `DONE` after the last one's.

        Returns:
            A list of chunks (empty for an event of no chat form), or `DONE` for a terminal
            event (`response.completed` / `response.incomplete`), whose chunks are then
            given by `final`.

        Raises:
            StreamError: `response.failed`, or an `error` event.
        """
        kind = data.get("type")
        if kind == "response.created":
            response = data.get("response")
            if isinstance(response, dict):
                self._id = str(response.get("id") or "")
                self._model = str(response.get("model") or "")
            return [self._chunk({"role": "assistant", "content": ""})]
        if kind == "response.output_text.delta":
            return [self._chunk({"content": str(data.get("delta") or "")})] if data.get("delta") else []
        if kind == "response.refusal.delta":
            return [self._chunk({"refusal": str(data.get("delta") or "")})] if data.get("delta") else []
        if kind == "response.output_item.added":
            item = data.get("item")
            if not isinstance(item, dict) or item.get("type") != "function_call":
                return []
            index = len(self._calls)
            self._calls[str(item.get("id") or f"#{data.get('output_index')}")] = index
            self._calls.setdefault(f"#{data.get('output_index')}", index)
            call = {
                "index": index,
                "id": str(item.get("call_id") or ""),
                "type": "function",
                "function": {"name": str(item.get("name") or ""), "arguments": str(item.get("arguments") or "")},
            }
            return [self._chunk({"tool_calls": [call]})]
        if kind == "response.function_call_arguments.delta":
            at = self._call_index(data)
            piece = data.get("delta")
            if at is None or not piece:
                return []
            return [self._chunk({"tool_calls": [{"index": at, "function": {"arguments": str(piece)}}]})]
        if kind in ("response.failed", "error"):
            raise _failure(data)
        if kind in ("response.completed", "response.incomplete"):
            return DONE
        return []

    def final(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        """The closing chunks of a terminal event's data: the finish, then the usage."""
        response = data.get("response")
        response = response if isinstance(response, dict) else {}
        if data.get("type") == "response.incomplete":
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            finish = _INCOMPLETE.get(str(reason), "stop")
        else:
            finish = "tool_calls" if self._calls else "stop"
        prompt, completion = usage_of(response.get("usage"))
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        closing = {**self._chunk({}), "choices": [], "usage": usage}
        return [self._chunk({}, finish), closing]
