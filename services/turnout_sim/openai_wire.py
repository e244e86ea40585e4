"""OpenAI Chat Completions wire format: bodies, chunks, SSE framing, errors.

Owns: every byte the simulator sends that is specific to OpenAI's API —
`chat.completion` objects, `chat.completion.chunk` events, the SSE framing
(`data: ...\\n\\n`, `data: [DONE]`), the `{"error": {...}}` envelopes with
realistic messages/types/codes, and reading the request fields the
simulator honours (`model`, `stream`, `max_tokens`, `stream_options`).
Must not import: aiohttp or any I/O; pure functions of their arguments.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

DEFAULT_TOKENS = 12
"""Completion length in tokens when the request gives no `max_tokens`."""
MAX_TOKENS_CAP = 4096
"""Largest completion the simulator generates, in tokens."""
CONTEXT_LIMIT = 8192
"""Context window quoted by the `ctx` error, in tokens."""

MODELS = ("gpt-4o-mini", "gpt-4o", "gpt-4.1", "gpt-5")
"""Model ids listed by `GET /v1/models`."""

ErrorBody = dict[str, dict[str, Any]]


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
        completion_tokens: tokens to generate (`max_tokens` /
            `max_completion_tokens`, capped, else `DEFAULT_TOKENS`).
        prompt_tokens: a deterministic estimate: whitespace-separated words
            in all message texts.
    """

    model: str
    stream: bool
    include_usage: bool
    completion_tokens: int
    prompt_tokens: int


# ---------------------------------------------------------------- errors


def envelope(message: str, type_: str | None, code: str | int | None, param: str | None = None) -> ErrorBody:
    """The OpenAI error envelope `{"error": {message, type, param, code}}`."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def rate_limit_error(model: str, retry_in: str = "2s") -> ErrorBody:
    """429 requests-per-minute limit (type `requests`, code `rate_limit_exceeded`).

    Args:
        model: model name quoted in the message.
        retry_in: the wait quoted in the message, OpenAI style (`2s`, `20ms`).
    """
    return envelope(
        f"Rate limit reached for {model} in organization org-sim on requests per min "
        f"(RPM): Limit 3, Used 3, Requested 1. Please try again in {retry_in}. "
        "Visit https://platform.openai.com/account/rate-limits to learn more.",
        "requests",
        "rate_limit_exceeded",
    )


def quota_error() -> ErrorBody:
    """429 insufficient_quota: credit exhausted, retrying does not help."""
    return envelope(
        "You exceeded your current quota, please check your plan and billing details. "
        "For more information on this error, read the docs: "
        "https://platform.openai.com/docs/guides/error-codes/api-errors.",
        "insufficient_quota",
        "insufficient_quota",
    )


def context_length_error(prompt_tokens: int) -> ErrorBody:
    """400 context_length_exceeded, quoting `CONTEXT_LIMIT` tokens."""
    used = max(prompt_tokens, CONTEXT_LIMIT + 808)
    return envelope(
        f"This model's maximum context length is {CONTEXT_LIMIT} tokens. However, your "
        f"messages resulted in {used} tokens. Please reduce the length of the messages.",
        "invalid_request_error",
        "context_length_exceeded",
        "messages",
    )


def content_policy_error() -> ErrorBody:
    """400 content_policy_violation."""
    return envelope(
        "Your request was rejected as a result of our safety system. Your prompt may "
        "contain text that is not allowed by our safety system.",
        "invalid_request_error",
        "content_policy_violation",
    )


def missing_key_error() -> ErrorBody:
    """401 for a request with no usable `Authorization: Bearer` header."""
    return envelope(
        "You didn't provide an API key. You need to provide your API key in an "
        "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), "
        "or as the password field (with blank username) if you're accessing the API "
        "from your browser and are prompted for a username and password. You can "
        "obtain an API key from https://platform.openai.com/account/api-keys.",
        "invalid_request_error",
        None,
    )


def invalid_json_error() -> ErrorBody:
    """400 for a body that is not JSON (OpenAI's wording)."""
    return envelope(
        "We could not parse the JSON body of your request. (HINT: This likely means "
        "you aren't using your HTTP library correctly. The OpenAI API expects a JSON "
        "payload, but what was sent was not valid JSON. If you have trouble figuring "
        "out how to fix this, please contact us through our help center at "
        "help.openai.com.)",
        "invalid_request_error",
        None,
    )


def invalid_scenario_error(reason: str) -> ErrorBody:
    """400 explaining why the sim scenario (model name / header) is invalid."""
    return envelope(f"Invalid simulator scenario: {reason}", "invalid_request_error", "invalid_sim_scenario")


def invalid_url_error(method: str, path: str) -> ErrorBody:
    """404 for an unknown route, as OpenAI answers it."""
    return envelope(f"Invalid URL ({method} {path})", "invalid_request_error", None)


def body_error(rate_limited: bool, model: str) -> ErrorBody:
    """The envelope sent inside a 200 body / first SSE event (`bodyerr`)."""
    if rate_limited:
        return rate_limit_error(model)
    return status_error(500, model)


def status_error(status: int, model: str) -> ErrorBody:
    """The realistic body for a bare error status step.

    Args:
        status: one of the statuses in `scenarios.ERROR_STATUSES`.
        model: requested model name, quoted where OpenAI quotes it.
    """
    if status == 429:
        return rate_limit_error(model)
    builders: dict[int, tuple[str, str | None, str | int | None]] = {
        400: ("Invalid value for 'messages': the request is malformed.", "invalid_request_error", None),
        401: (
            "Incorrect API key provided: sk-sim****1234. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            "invalid_request_error",
            "invalid_api_key",
        ),
        403: (
            "Country, region, or territory not supported",
            "request_forbidden",
            "unsupported_country_region_territory",
        ),
        404: (
            f"The model `{model}` does not exist or you do not have access to it.",
            "invalid_request_error",
            "model_not_found",
        ),
        408: ("Request timed out.", "timeout", None),
        413: ("Request too large. Please reduce the size of your request.", "invalid_request_error", None),
        422: ("Unprocessable entity: the request could not be processed.", "invalid_request_error", None),
        500: (
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
            None,
        ),
        501: ("Not implemented.", "server_error", None),
        502: ("Bad gateway.", "cf_bad_gateway", 502),
        503: ("The engine is currently overloaded, please try again later.", "server_error", None),
        504: ("Gateway timeout.", "cf_gateway_timeout", 504),
        505: ("HTTP version not supported.", "server_error", None),
        529: ("Overloaded", "overloaded_error", None),
    }
    message, type_, code = builders[status]
    return envelope(message, type_, code)


def rate_limit_403_error(model: str) -> ErrorBody:
    """403 whose body speaks of a rate limit (some proxies answer so)."""
    return envelope(
        f"Rate limit reached for {model}: too many requests. Please try again in 2s.",
        "requests",
        "rate_limit_exceeded",
    )


# ---------------------------------------------------------------- requests


def _int_param(body: dict[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(
            envelope(f"Invalid type for '{name}': expected an integer.", "invalid_request_error", "invalid_type", name)
        )
    if value < 1:
        raise RequestError(
            envelope(
                f"Invalid '{name}': integer below minimum value. Expected a value >= 1, "
                f"but got {value} instead.",
                "invalid_request_error",
                "integer_below_min_value",
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


def parse_request(body: object) -> ChatRequest:
    """Read the honoured fields of a decoded chat completion request body.

    Raises:
        RequestError: a required field is missing or has the wrong type.
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
    limit = _int_param(body, "max_completion_tokens") or _int_param(body, "max_tokens")
    options = body.get("stream_options")
    return ChatRequest(
        model=model,
        stream=body.get("stream") is True,
        include_usage=isinstance(options, dict) and options.get("include_usage") is True,
        completion_tokens=min(limit, MAX_TOKENS_CAP) if limit else DEFAULT_TOKENS,
        prompt_tokens=_count_words(messages),
    )


# ---------------------------------------------------------------- answers


def tokens(count: int) -> list[str]:
    """The deterministic completion, one string per token: `tok0`, ` tok1`, ...

    Joined, they give the full answer text `tok0 tok1 ... tok{count-1}`.
    """
    return [f"tok{i}" if i == 0 else f" tok{i}" for i in range(count)]


def usage(req: ChatRequest) -> dict[str, int]:
    """The `usage` object for a full completion of `req`."""
    return {
        "prompt_tokens": req.prompt_tokens,
        "completion_tokens": req.completion_tokens,
        "total_tokens": req.prompt_tokens + req.completion_tokens,
    }


def completion(req: ChatRequest, *, completion_id: str, created_s: int) -> dict[str, Any]:
    """A full non-streaming `chat.completion` object.

    Args:
        req: the request being answered.
        completion_id: `chatcmpl-...` id.
        created_s: creation time, integer epoch seconds.
    """
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created_s,
        "model": req.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "".join(tokens(req.completion_tokens)), "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": usage(req),
        "system_fingerprint": "fp_sim",
    }


def chunk(
    req: ChatRequest,
    *,
    completion_id: str,
    created_s: int,
    delta: dict[str, Any] | None = None,
    finish_reason: str | None = None,
    final_usage: bool = False,
) -> dict[str, Any]:
    """One `chat.completion.chunk` object.

    Args:
        req: the request being answered.
        completion_id: same id for every chunk of one stream.
        created_s: creation time, integer epoch seconds.
        delta: the choice's delta (`{"role": "assistant", "content": ""}`,
            `{"content": " tok3"}`, `{}` with the finish reason).
        finish_reason: None while streaming, `"stop"` on the last choice.
        final_usage: build the trailing usage chunk (`choices: []`).
    """
    obj: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created_s,
        "model": req.model,
        "system_fingerprint": "fp_sim",
        "choices": []
        if final_usage
        else [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish_reason}],
    }
    if req.include_usage:
        obj["usage"] = usage(req) if final_usage else None
    return obj


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


def models_list(created_s: int) -> dict[str, Any]:
    """The `GET /v1/models` body."""
    return {
        "object": "list",
        "data": [{"id": m, "object": "model", "created": created_s, "owned_by": "system"} for m in MODELS],
    }
