"""Anthropic Messages upstream (non-streaming), answering in OpenAI format.

Owns: one non-streaming attempt on an `anthropic` provider — translating
the target's OpenAI request body (`anthropic_wire.to_anthropic_request`),
`POST {base_url}/v1/messages` with `x-api-key` and `anthropic-version`
within the attempt's timeout, and turning what comes back into an
`AttemptResult` whose body is an OpenAI `chat.completion` (so everything
downstream stays OpenAI-shaped).
Must not import: services, FastAPI, arq.

Errors: Anthropic bodies `{"type": "error", "error": {"type", "message"}}`
are read by `base.error_fields`; their statuses (400, 401, 402, 403,
404, 413, 429, 500, 529, ...) and types are classified by
`turnout.core.classify` (which knows Anthropic's types); `retry-after` and
`anthropic-ratelimit-*-reset` hints by `turnout.core.hints`. A request that
Anthropic cannot express (`WireError`) is a 400 `invalid_request_error`
outcome without any HTTP call (terminal: SPEC §3 "400 ... terminal").
Source: https://docs.anthropic.com/en/api/messages, /en/api/errors.
"""

from __future__ import annotations

from typing import Any

import httpx
import msgspec

from turnout.adapters.anthropic_wire import (
    ANTHROPIC_VERSION, MESSAGES_PATH, WireError, is_message, openai_usage, to_anthropic_request,
    to_openai_completion,
)
from turnout.adapters.exchange import send_json
from turnout.adapters.base import AttemptResult, Usage, error_fields
from turnout.adapters.openai_chat import outcome_of_response
from turnout.core.hints import retry_after_s
from turnout.core.types import Outcome, TransportError

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()


def messages_request(
    client: httpx.AsyncClient, *, base_url: str, api_key: str, body: bytes, request_id: str, stream: bool
) -> httpx.Request:
    """The HTTP request for an OpenAI-format `body` sent to an Anthropic provider.

    Raises:
        WireError: the body cannot be expressed in Anthropic's API.
    """
    try:
        request = _decode.decode(body)
    except msgspec.DecodeError as exc:
        raise WireError("the request body is not valid JSON", "body") from exc
    translated = to_anthropic_request(request, str(request.get("model", "")))
    headers = {
        "x-api-key": api_key, "anthropic-version": ANTHROPIC_VERSION, "content-type": "application/json",
        "x-request-id": request_id,
    }
    if stream:
        headers["accept"] = "text/event-stream"
    return client.build_request(
        "POST", base_url.rstrip("/") + MESSAGES_PATH, content=_encode.encode(translated), headers=headers
    )


def untranslatable(exc: WireError) -> AttemptResult:
    """The outcome of a request Anthropic cannot express: a 400 without a call."""
    return AttemptResult(outcome=Outcome(
        status=400, error_type="invalid_request_error", message=f"{exc.message} (param: {exc.param})",
    ))


def outcome_of_message(status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float) -> AttemptResult:
    """An `AttemptResult` for a complete Anthropic response (pure).

    A 2xx `message` is translated to an OpenAI `chat.completion` body; a 2xx
    error body is `error_in_body` (classified by its type, never a success);
    any other 2xx body is malformed (PROTOCOL). Error statuses keep the
    provider's type and message.

    Args:
        status: HTTP status.
        headers: response headers (rate-limit hints).
        content: the response body.
        now_epoch_s: current time, epoch seconds (hint dates, `created`).
    """
    if not 200 <= status < 300:
        return outcome_of_response(status, headers, content, now_epoch_s)
    try:
        data: Any = _decode.decode(content) if content else None
    except msgspec.DecodeError:
        data = None
    if isinstance(data, dict) and data.get("type") == "error" or (isinstance(data, dict) and data.get("error")):
        etype, code, message = error_fields(data)
        hint = retry_after_s(headers, status=None, message=message, now_epoch_s=now_epoch_s)
        return AttemptResult(outcome=Outcome(
            status=status, error_type=etype, error_code=code, message=message, retry_after_s=hint,
            error_in_body=True,
        ))
    if not is_message(data):
        return AttemptResult(outcome=Outcome(
            status=status, transport=TransportError.PROTOCOL,
            message="upstream answered 2xx with a body that is not an Anthropic message",
        ))
    usage = openai_usage(data.get("usage"))
    return AttemptResult(
        outcome=Outcome(status=status),
        body=_encode.encode(to_openai_completion(data, created_s=int(now_epoch_s))),
        usage=Usage(input_tokens=usage["prompt_tokens"], output_tokens=usage["completion_tokens"]),
    )


async def call_messages(
    client: httpx.AsyncClient,
    *,
    base_url: str,
    api_key: str,
    body: bytes,
    timeout_s: float,
    request_id: str,
) -> AttemptResult:
    """One non-streaming attempt: POST `{base_url}/v1/messages`.

    Args:
        client: the process's shared client.
        base_url: the provider's root without `/v1` (`https://api.anthropic.com`).
        api_key: the credential, sent as `x-api-key` (never logged or echoed).
        body: the target's request body in OpenAI form (`upstream_body`).
        timeout_s: the whole attempt's limit, seconds (`Dispatch.timeout_s`).
        request_id: Turnout's request id, sent as `x-request-id`.

    Returns:
        An `AttemptResult` whose success body is an OpenAI `chat.completion`;
        never raises for upstream trouble. Cancellation propagates.
    """
    try:
        request = messages_request(
            client, base_url=base_url, api_key=api_key, body=body, request_id=request_id, stream=False
        )
    except WireError as exc:
        return untranslatable(exc)
    return await send_json(client, request, timeout_s=timeout_s, read=outcome_of_message)
