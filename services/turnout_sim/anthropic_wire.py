"""Anthropic Messages wire format for the simulator: request fields, bodies, events, errors.

Owns: reading the request fields the simulator honours on `POST /v1/messages`
(`model`, `max_tokens` — required, as Anthropic requires it — `stream`,
`messages`, `system`, `tools` / `tool_choice`, an assistant prefill as the
last message), the `message` object, the named SSE events
(`message_start`, `content_block_start`, `ping`, `content_block_delta`,
`content_block_stop`, `message_delta`, `message_stop`, `error`) and the error
bodies `{"type": "error", "error": {"type", "message"}, "request_id"}` with
Anthropic's types per status.
Must not import: aiohttp or any I/O; pure functions of their arguments.

The answer is the OpenAI side's deterministic text (`tok0 tok1 ...`, N =
`max_tokens` capped at 4096, continued after a matching prefill), computed by
`openai_wire` from an equivalent `ChatRequest`. A request with tools whose
`tool_choice` is not `{"type": "none"}` gets one `tool_use` block instead
(the tool `{"type": "tool", "name"}` names, else the first), whose input is
built from the tool's `input_schema` (`{"answer": "<the text>"}` for a
schema without properties; see `tool_calls`), with `stop_reason: tool_use`;
streamed as `input_json_delta` fragments. A request whose last message holds
a `tool_result` block gets text quoting it (`Tool result: ...`). An answer cut by `max_tokens` (step `len<N>`
with `max_tokens` < N; see `scenarios`) has `stop_reason: max_tokens`, in
the message and in the stream's `message_delta`, as Anthropic reports it.
Sources: https://docs.anthropic.com/en/api/messages, /en/api/errors,
/en/docs/build-with-claude/streaming.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Protocol

from turnout_sim import openai_wire, tool_calls
from turnout_sim.tool_calls import ToolCall

ANTHROPIC_ERROR_TYPE: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
    501: "api_error",
    502: "api_error",
    503: "api_error",
    504: "timeout_error",
    505: "api_error",
    529: "overloaded_error",
}
"""HTTP status -> Anthropic `error.type` for a bare status step."""

_MESSAGES = {
    400: "messages: the request is malformed.",
    401: "invalid x-api-key",
    403: "Your API key does not have permission to use the specified resource.",
    404: "model: {model}",
    408: "Request timed out.",
    413: "Request exceeds the maximum allowed number of bytes.",
    422: "The request could not be processed.",
    429: "Number of request tokens has exceeded your per-minute rate limit. Please try again later.",
    500: "Internal server error",
    529: "Overloaded",
}

ErrorBody = dict[str, Any]


class RequestError(ValueError):
    """The request body is unusable; `body` is the 400 answer to send."""

    def __init__(self, body: ErrorBody) -> None:
        super().__init__(body["error"]["message"])
        self.body = body


def error(error_type: str, message: str) -> ErrorBody:
    """Anthropic's error body."""
    return {"type": "error", "error": {"type": error_type, "message": message}, "request_id": "req_sim"}


def status_error(status: int, model: str) -> ErrorBody:
    """The body of a bare error status step (`overloaded_error` for 529, ...)."""
    message = _MESSAGES.get(status, f"HTTP {status}").format(model=model)
    return error(ANTHROPIC_ERROR_TYPE.get(status, "api_error"), message)


def quota_error() -> ErrorBody:
    """Anthropic's out-of-credit answer (sent with 400)."""
    return error(
        "invalid_request_error",
        "Your credit balance is too low to access the Anthropic API. "
        "Please go to Plans & Billing to upgrade or purchase credits.",
    )


def context_error(prompt_tokens: int) -> ErrorBody:
    """Anthropic's prompt-too-long answer (sent with 400)."""
    used = max(prompt_tokens, 208_310)
    return error("invalid_request_error", f"prompt is too long: {used} tokens > 200000 maximum")


@dataclass(frozen=True, slots=True, kw_only=True)
class MessagesRequest:
    """The honoured fields of a Messages request.

    Attributes:
        model: requested model name, echoed in the answer.
        stream: SSE wanted.
        chat: the equivalent OpenAI-side request (answer text, prefill, usage,
            a quoted tool result).
        call: the tool call the answer makes (see `tool_calls`), else None.
    """

    model: str
    stream: bool
    chat: openai_wire.ChatRequest
    call: ToolCall | None = None


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return None


def parse_request(body: object) -> MessagesRequest:
    """Read the honoured fields of a decoded Messages request body.

    Raises:
        RequestError: not an object, or `model`, `max_tokens` or `messages` missing or wrong.
    """
    if not isinstance(body, dict):
        raise RequestError(error("invalid_request_error", "The request body is not valid JSON."))
    model, limit, messages = body.get("model"), body.get("max_tokens"), body.get("messages")
    if not isinstance(model, str) or not model:
        raise RequestError(error("invalid_request_error", "model: Field required"))
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise RequestError(error("invalid_request_error", "max_tokens: Field required"))
    if not isinstance(messages, list) or not messages:
        raise RequestError(error("invalid_request_error", "messages: Field required"))
    texts = [_text(m.get("content")) or "" for m in messages if isinstance(m, dict)]
    texts.append(_text(body.get("system")) or "")
    last = messages[-1] if isinstance(messages[-1], dict) else {}
    prefill = _text(last.get("content")) if last.get("role") == "assistant" else None
    count = min(limit, openai_wire.MAX_TOKENS_CAP)
    call, result = tool_calls.messages_decision(body)
    text = None if result is None else tuple(tool_calls.quote_words(result))
    if text is not None:
        count, prefill = min(len(text), count), None
    chat = chat_of(model, body.get("stream") is True, count=count, texts=texts, prefill=prefill, limit=limit, text=text)
    return MessagesRequest(model=model, stream=chat.stream, chat=chat, call=call)


def chat_of(
    model: str,
    stream: bool,
    *,
    count: int,
    texts: list[str],
    prefill: str | None,
    limit: int | None,
    text: tuple[str, ...] | None,
    include_usage: bool = False,
) -> openai_wire.ChatRequest:
    """The OpenAI-side request a translated wire's answer is computed from: `count` tokens (or
    the quoted `text`, cut when `count` is shorter), prompt tokens counted over `texts`, a
    `prefill` matched against the answer."""
    return openai_wire.ChatRequest(
        model=model,
        stream=stream,
        include_usage=include_usage,
        completion_tokens=count,
        prompt_tokens=sum(len(t.split()) for t in texts),
        prefill=prefill,
        prefill_words=None if prefill is None else openai_wire.prefill_match(prefill, count),
        limit=limit,
        cut=text is not None and count < len(text),
        text=text,
    )


def with_answer_length(req: MessagesRequest, answer_tokens: int) -> MessagesRequest:
    """`req` answered by a model whose full answer is `answer_tokens` long (step `len<N>`):
    cut to `max_tokens` when that is smaller (`openai_wire.with_answer_length`)."""
    return replace(req, chat=openai_wire.with_answer_length(req.chat, answer_tokens))


def stop_reason(req: MessagesRequest) -> str:
    """The answer's `stop_reason`: `max_tokens` when `max_tokens` cut it, else
    `tool_use` for a forced tool, else `end_turn` (docs: /en/api/messages)."""
    if req.chat.cut:
        return "max_tokens"
    return "tool_use" if req.call is not None else "end_turn"


class Answering(Protocol):
    """A parsed request of a wire whose answer is the OpenAI side's text or one tool call."""

    @property
    def chat(self) -> openai_wire.ChatRequest:
        """The equivalent OpenAI-side request."""
        ...

    @property
    def call(self) -> ToolCall | None:
        """The tool call the answer makes, else None."""
        ...


def pieces(req: Answering) -> list[str]:
    """The content deltas of the answer: text pieces, or the tool input's JSON
    in pieces (a free-form input `{"answer": "` + each text piece + `"}`)."""
    text = openai_wire.answer_pieces(req.chat)
    if req.call is None:
        return text
    if req.call.arguments is None:
        return ['{"answer": "', *text, '"}']
    return tool_calls.fragments(tool_calls.arguments_json(req.call, ""))


def usage(req: MessagesRequest, *, final: bool = True) -> dict[str, int]:
    """The `usage` object (output tokens: 1 in `message_start`, as Anthropic sends)."""
    return {
        "input_tokens": req.chat.prompt_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": openai_wire.produced_tokens(req.chat) if final else 1,
    }


def _block(req: MessagesRequest, seq: int, full: bool) -> dict[str, Any]:
    if req.call is None:
        return {"type": "text", "text": "".join(pieces(req)) if full else ""}
    tool_input = json.loads("".join(pieces(req))) if full else {}
    return {"type": "tool_use", "id": f"toolu_sim{seq:012d}", "name": req.call.name, "input": tool_input}


def message(req: MessagesRequest, *, message_id: str, seq: int) -> dict[str, Any]:
    """The complete non-streaming `message` object."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": req.model,
        "content": [_block(req, seq, True)],
        "stop_reason": stop_reason(req),
        "stop_sequence": None,
        "usage": usage(req),
    }


def event(name: str, data: dict[str, Any]) -> bytes:
    """One named SSE event: `event: <name>\\ndata: <compact json>\\n\\n`."""
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def opening_events(req: MessagesRequest, *, message_id: str, seq: int) -> list[bytes]:
    """`message_start`, `content_block_start` (index 0) and a `ping`."""
    start = {
        **message(req, message_id=message_id, seq=seq),
        "content": [],
        "stop_reason": None,
        "usage": usage(req, final=False),
    }
    return [
        event("message_start", {"type": "message_start", "message": start}),
        event(
            "content_block_start", {"type": "content_block_start", "index": 0, "content_block": _block(req, seq, False)}
        ),
        event("ping", {"type": "ping"}),
    ]


def delta_event(req: MessagesRequest, piece: str) -> bytes:
    """One `content_block_delta` (`text_delta`, or `input_json_delta` for a tool)."""
    delta = (
        {"type": "text_delta", "text": piece}
        if req.call is None
        else {"type": "input_json_delta", "partial_json": piece}
    )
    return event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})


def closing_events(req: MessagesRequest, *, with_stop: bool = True) -> list[bytes]:
    """`content_block_stop`, `message_delta` and (unless `nodone`) `message_stop`."""
    events = [
        event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason(req), "stop_sequence": None},
                "usage": {"output_tokens": openai_wire.produced_tokens(req.chat)},
            },
        ),
    ]
    if with_stop:
        events.append(event("message_stop", {"type": "message_stop"}))
    return events


def error_event(body: ErrorBody) -> bytes:
    """The `error` SSE event carrying `body`."""
    return event("error", {"type": "error", "error": body["error"]})


MALFORMED_EVENT = b'event: content_block_delta\ndata: {"type": "content_block_delta", \n\n'
"""An event whose data is truncated JSON (`badchunk`)."""
