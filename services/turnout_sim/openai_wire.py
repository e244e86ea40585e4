"""OpenAI Chat Completions wire format: request fields, bodies, SSE framing.

Owns: the success bytes specific to OpenAI's API — `chat.completion`
objects, `chat.completion.chunk` events, the SSE framing
(`data: ...\\n\\n`, `data: [DONE]`), the models list — and reading the
request fields the simulator honours (`model`, `stream`, `max_tokens`,
`max_completion_tokens`, `n`, `stream_options`, an assistant prefill as the
last message, `tools` / `tool_choice` / a tool result as the last message,
`logprobs` / `top_logprobs`) — and the deterministic answer text of each
choice, continued after a prefill, cut by the limit when the model's answer
is longer (`len<N>`; see `scenarios`), or quoting a tool result (see
`tool_calls`). The `chat.completion` objects and chunks are built in
`chat_answer`; error envelopes live in `openai_errors`.
Must not import: aiohttp or any I/O; pure functions of their arguments.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from turnout_sim import tool_calls
from turnout_sim.openai_errors import ErrorBody, envelope, invalid_json_error
from turnout_sim.tool_calls import ToolCall

DEFAULT_TOKENS = 12
"""Completion length in tokens when the request gives no `max_tokens`."""
MAX_TOKENS_CAP = 4096
"""Largest completion the simulator generates, in tokens."""
MAX_N = 128
"""Largest `n` (choices per request) accepted, as OpenAI's API documents."""
MAX_TOP_LOGPROBS = 20
"""Largest `top_logprobs` accepted, as OpenAI's API documents."""

MODELS = ("gpt-4o-mini", "gpt-4o", "gpt-4.1", "gpt-5")
"""Model ids listed by `GET /v1/models`."""


class RequestError(ValueError):
    """The request body is unusable; `body` is the 400 answer to send."""

    def __init__(self, body: ErrorBody) -> None:
        super().__init__(body["error"]["message"])
        self.body = body


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatRequest:
    """The fields of a chat completion request that the simulator honours.

    Attributes:
        model: requested model name, echoed in the answer.
        stream: SSE answer wanted.
        include_usage: `stream_options.include_usage` was true.
        completion_tokens: length N of the full deterministic answer, in
            tokens (`max_tokens` / `max_completion_tokens`, capped, else
            `DEFAULT_TOKENS`). With a matching prefill only N - K of them
            are produced (see `answer_pieces`).
        prompt_tokens: a deterministic estimate: whitespace-separated words
            in all message texts.
        prefill: the last message's content when that message has role
            `assistant` and string content (possibly ""), else None.
        prefill_words: K when `prefill` is the first K words of choice 0's
            answer (see `prefill_match`), else None (no prefill, or no match).
        n: number of choices wanted (`n`, 1..`MAX_N`).
        limit: the request's `max_completion_tokens` / `max_tokens` as sent,
            in tokens; None when it gives neither.
        cut: the answer was cut by `limit` (the model's answer is longer;
            see `with_answer_length`): `finish_reason: length`.
        call: the tool call every choice makes instead of text (see
            `tool_calls`), or None.
        text: fixed answer pieces replacing the `tok` words for every choice
            (the quote of a tool result), or None.
        logprobs: `logprobs: true` was asked (`choices[].logprobs.content`).
        top_logprobs: alternatives per token, 0..`MAX_TOP_LOGPROBS`.
    """

    model: str
    stream: bool
    include_usage: bool
    completion_tokens: int
    prompt_tokens: int
    prefill: str | None = None
    prefill_words: int | None = None
    n: int = 1
    limit: int | None = None
    cut: bool = False
    call: ToolCall | None = None
    text: tuple[str, ...] | None = None
    logprobs: bool = False
    top_logprobs: int = 0


# ---------------------------------------------------------------- requests


def int_param(body: dict[str, Any], name: str, maximum: int | None = None, minimum: int = 1) -> int | None:
    """The integer field `name` of `body`, or None when absent or null.

    Raises:
        RequestError: not an integer, or outside `minimum`..`maximum`
            (OpenAI's 400 body naming the field).
    """
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(
            envelope(
                f"Invalid type for '{name}': expected an integer.",
                "invalid_request_error",
                "invalid_type",
                name,
            )
        )
    if value < minimum:
        raise RequestError(
            envelope(
                f"Invalid '{name}': integer below minimum value. Expected a value >= {minimum}, "
                f"but got {value} instead.",
                "invalid_request_error",
                "integer_below_min_value",
                name,
            )
        )
    if maximum is not None and value > maximum:
        raise RequestError(
            envelope(
                f"Invalid '{name}': integer above maximum value. Expected a value <= {maximum}, "
                f"but got {value} instead.",
                "invalid_request_error",
                "integer_above_max_value",
                name,
            )
        )
    return value


def _count_words(messages: list[Any]) -> int:
    words = 0
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            words += len(content.split())
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    words += len(part["text"].split())
    return words


def _prefill(messages: list[Any]) -> str | None:
    """The assistant prefill: the last message's string content if its role
    is `assistant`, else None."""
    if not messages or not isinstance(messages[-1], dict):
        return None
    last = messages[-1]
    content = last.get("content")
    if last.get("role") == "assistant" and isinstance(content, str):
        return content
    return None


def _word(index: int, choice: int) -> str:
    """Word `index` of choice `choice`'s answer: `tok3`, or `c1tok3` for choice 1."""
    return f"tok{index}" if choice == 0 else f"c{choice}tok{index}"


def prefill_match(prefill: str, count: int, choice: int = 0) -> int | None:
    """How many answer words a prefill already holds, if it continues the answer.

    Args:
        prefill: the assistant prefill text.
        count: N, the full answer's length in tokens.
        choice: the choice whose answer is matched (0 for `tok0 tok1 ...`,
            k for `c<k>tok0 c<k>tok1 ...`).

    Returns:
        K (0 <= K <= N) when `prefill` is exactly the answer's first K words
        (`tok0 tok1 ... tok{K-1}` for choice 0, joined by single spaces;
        "" for K = 0), optionally followed by one space; None for any other
        text.
    """
    text = prefill.removesuffix(" ")
    if not text:
        return 0
    words = text.split(" ")
    if len(words) > count or words != [_word(i, choice) for i in range(len(words))]:
        return None
    return len(words)


def parse_request(body: object) -> ChatRequest:
    """Read the honoured fields of a decoded chat completion request body.

    Raises:
        RequestError: a required field is missing or has the wrong type,
            `n` is outside 1..`MAX_N`, `top_logprobs` outside
            0..`MAX_TOP_LOGPROBS` or given without `logprobs: true` (OpenAI's
            400 body naming the field).
    """
    if not isinstance(body, dict):
        raise RequestError(invalid_json_error())
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise RequestError(envelope("you must provide a model parameter", "invalid_request_error", None))
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise RequestError(
            envelope(
                "Missing required parameter: 'messages'.",
                "invalid_request_error",
                "missing_required_parameter",
                "messages",
            )
        )
    limit = int_param(body, "max_completion_tokens") or int_param(body, "max_tokens")
    n = int_param(body, "n", MAX_N) or 1
    options = body.get("stream_options")
    completion_tokens = min(limit, MAX_TOKENS_CAP) if limit else DEFAULT_TOKENS
    prefill = _prefill(messages)
    call, result = tool_calls.chat_decision(body)
    text = None if result is None else tuple(tool_calls.quote_words(result))
    if text is not None:
        completion_tokens, prefill = (min(len(text), limit) if limit else len(text)), None
    logprobs, top_logprobs = _logprobs(body)
    return ChatRequest(
        model=model,
        stream=body.get("stream") is True,
        include_usage=isinstance(options, dict) and options.get("include_usage") is True,
        completion_tokens=completion_tokens,
        prompt_tokens=_count_words(messages),
        prefill=prefill,
        prefill_words=None if prefill is None else prefill_match(prefill, completion_tokens),
        n=n,
        limit=limit,
        cut=text is not None and completion_tokens < len(text),
        call=call,
        text=text,
        logprobs=logprobs,
        top_logprobs=top_logprobs,
    )


def _logprobs(body: dict[str, Any]) -> tuple[bool, int]:
    """`(logprobs, top_logprobs)`; `top_logprobs` needs `logprobs: true`."""
    wanted = body.get("logprobs") is True
    top = int_param(body, "top_logprobs", MAX_TOP_LOGPROBS, minimum=0)
    if top is not None and not wanted:
        raise RequestError(
            envelope(
                "Invalid value for 'top_logprobs': 'logprobs' must be set to true when 'top_logprobs' is used.",
                "invalid_request_error",
                "invalid_value",
                "top_logprobs",
            )
        )
    return wanted, top or 0


def with_answer_length(req: ChatRequest, answer_tokens: int) -> ChatRequest:
    """`req` answered by a model whose full answer is `answer_tokens` long (step `len<N>`).

    Args:
        req: the parsed request.
        answer_tokens: the model's answer length, in tokens (1..4096).

    Returns:
        `req` with `completion_tokens` = `answer_tokens`, or `req.limit` when
        that is smaller, and then `cut` (the providers' `finish_reason:
        length` / `stop_reason: max_tokens`); the prefill re-matched against
        the new length.
    """
    if req.text is not None:  # a quoted tool result has a length of its own
        return req
    cut = req.limit is not None and req.limit < answer_tokens
    count = req.limit if cut and req.limit is not None else answer_tokens
    return replace(
        req,
        completion_tokens=count,
        cut=cut,
        prefill_words=None if req.prefill is None else prefill_match(req.prefill, count),
    )


def finish_reason(req: ChatRequest) -> str:
    """Every choice's `finish_reason`: `tool_calls` for a tool call, `length`
    when the limit cut the answer, else `stop`."""
    if req.call is not None:
        return "tool_calls"
    return "length" if req.cut else "stop"


# ---------------------------------------------------------------- answers


def tokens(count: int, choice: int = 0) -> list[str]:
    """The deterministic completion, one string per token: `tok0`, ` tok1`, ...

    Joined, they give the full answer text `tok0 tok1 ... tok{count-1}`
    (choice k >= 1: `c<k>tok0 c<k>tok1 ...`).
    """
    return [_word(i, choice) if i == 0 else f" {_word(i, choice)}" for i in range(count)]


def _prefill_words(req: ChatRequest, choice: int) -> int | None:
    if req.text is not None:
        return None
    if choice == 0 or req.prefill is None:
        return req.prefill_words
    return prefill_match(req.prefill, req.completion_tokens, choice)


def answer_pieces(req: ChatRequest, choice: int = 0) -> list[str]:
    """The content choice `choice` of this request gets, one string per streamed chunk.

    Without a matching prefill: `tokens(N, choice)`. With a prefill holding
    the choice's first K words: the remaining tokens `[" tok{K}", ...,
    " tok{N-1}"]`, the first one without its leading space when the prefill
    ends with a space, so that prefill + "".join(pieces) == the full answer
    text (empty when K = N).
    """
    if req.text is not None:
        return list(req.text[: req.completion_tokens])
    pieces = tokens(req.completion_tokens, choice)
    skip = _prefill_words(req, choice)
    if skip is None:
        return pieces
    rest = pieces[skip:]
    if rest and req.prefill is not None and req.prefill.endswith(" "):
        rest[0] = rest[0].removeprefix(" ")
    return rest


def call_arguments(req: ChatRequest, choice: int = 0) -> str:
    """The JSON arguments of choice `choice`'s tool call (`req.call` set)."""
    assert req.call is not None
    return tool_calls.arguments_json(req.call, "".join(tokens(req.completion_tokens, choice)))


def stream_pieces(req: ChatRequest) -> list[tuple[int, str]]:
    """The content chunks of a streamed answer, in send order, as (choice, piece).

    Round-robin over the `n` choices: word i of choice 0, of choice 1, ...,
    then word i + 1 of each (a choice with fewer pieces, after a prefill,
    drops out when done). With n = 1: `answer_pieces(req)`, each as (0, piece).
    A tool call's pieces are its arguments' JSON in fragments
    (`tool_calls.fragments`).
    """
    if req.call is not None:
        per_choice = [tool_calls.fragments(call_arguments(req, choice)) for choice in range(req.n)]
    else:
        per_choice = [answer_pieces(req, choice) for choice in range(req.n)]
    longest = max(len(pieces) for pieces in per_choice)
    return [(choice, pieces[i]) for i in range(longest) for choice, pieces in enumerate(per_choice) if i < len(pieces)]


def produced_tokens(req: ChatRequest) -> int:
    """Completion tokens actually produced over all `n` choices: N each, or
    N - K for a choice whose answer continues a matching prefill."""
    return sum(req.completion_tokens - (_prefill_words(req, choice) or 0) for choice in range(req.n))


def usage(req: ChatRequest) -> dict[str, int]:
    """The `usage` object for a full answer of `req` (tokens produced, every choice)."""
    produced = produced_tokens(req)
    return {
        "prompt_tokens": req.prompt_tokens,
        "completion_tokens": produced,
        "total_tokens": req.prompt_tokens + produced,
    }


def json_bytes(obj: object) -> bytes:
    """A JSON response body (pretty-printed like OpenAI's, UTF-8)."""
    return json.dumps(obj, indent=2).encode("utf-8")


def sse_event(obj: object) -> bytes:
    """One SSE event: `data: <compact json>\\n\\n`."""
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode("utf-8") + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"
"""The terminator OpenAI sends after the last chunk."""

MALFORMED_EVENT = b'data: {"choices": [\n\n'
"""An SSE event whose data is truncated JSON (`badchunk`)."""


def azure_models_list(created_s: int) -> dict[str, Any]:
    """The `GET /openai/models?api-version=...` body of Azure OpenAI (its fields: `status`,
    `created_at`, `capabilities`, `lifecycle_status`)."""
    return {
        "object": "list",
        "data": [
            {
                "id": m,
                "object": "model",
                "status": "succeeded",
                "created_at": created_s,
                "capabilities": {"chat_completion": True, "completion": False, "embeddings": False},
                "lifecycle_status": "generally-available",
            }
            for m in MODELS
        ],
    }


def models_list(created_s: int) -> dict[str, Any]:
    """The `GET /v1/models` body."""
    return {
        "object": "list",
        "data": [{"id": m, "object": "model", "created": created_s, "owned_by": "system"} for m in MODELS],
    }
