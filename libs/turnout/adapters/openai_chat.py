"""OpenAI-compatible Chat Completions upstream (non-streaming).

Owns: building the upstream request for one target, sending it through the
shared `httpx.AsyncClient` within the attempt's timeout, and turning whatever
comes back (response, error body, error envelope in a 200, exception) into
an `AttemptResult`: an `Outcome` for the loop plus the body on success.
Must not import: services, FastAPI, arq.

Wire format: https://platform.openai.com/docs/api-reference/chat/create and
the error object `{"error": {"message", "type", "param", "code"}}`.
"""

from __future__ import annotations

from typing import Any

import httpx
import msgspec

from turnout.core.hints import retry_after_s
from turnout.core.types import Outcome, Target, TransportError

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """Token counts of one successful call."""

    input_tokens: int = 0
    output_tokens: int = 0


class AttemptResult(msgspec.Struct, frozen=True, kw_only=True):
    """What one upstream call produced.

    Attributes:
        outcome: the classified-later facts for the loop.
        body: the upstream's JSON body on success (bytes, passed through),
            else None.
        usage: token counts on success.
        stream: for a streaming call committed at its first content, the open
            upstream stream (`turnout.adapters.openai_stream.UpstreamStream`).
    """

    outcome: Outcome
    body: bytes | None = None
    usage: Usage = Usage()
    stream: Any = None


def upstream_body(request: dict[str, Any], target: Target) -> bytes:
    """The request body for `target`: the client's body with `model` replaced."""
    return _encode.encode({**request, "model": target.model})


def _error_fields(data: Any) -> tuple[str | None, str | None, str]:
    """(type, code, message) from an OpenAI- or Anthropic-style error body."""
    if not isinstance(data, dict):
        return None, None, ""
    err = data.get("error", data)
    if isinstance(err, str):
        return None, None, err
    if not isinstance(err, dict):
        return None, None, ""
    etype, code, message = err.get("type"), err.get("code"), err.get("message", "")
    return (
        etype if isinstance(etype, str) else None,
        str(code) if isinstance(code, (str, int)) and code != "" else None,
        message if isinstance(message, str) else str(message),
    )


def outcome_of_response(status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float) -> AttemptResult:
    """Turn a complete upstream response into an `AttemptResult` (pure).

    A 2xx whose body is not JSON or lacks `choices` is malformed (PROTOCOL);
    a 2xx carrying `{"error": {...}}` is flagged `error_in_body` so the core
    classifies it by its type and code, never as a success (SPEC §3).
    """
    try:
        data = _decode.decode(content) if content else None
    except msgspec.DecodeError:
        data = None
    if 200 <= status < 300:
        if isinstance(data, dict) and "error" in data and data.get("error"):
            etype, code, message = _error_fields(data)
            hint = retry_after_s(headers, status=None, message=message, now_epoch_s=now_epoch_s)
            return AttemptResult(outcome=Outcome(
                status=status, error_type=etype, error_code=code, message=message,
                retry_after_s=hint, error_in_body=True,
            ))
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
            return AttemptResult(outcome=Outcome(
                status=status, transport=TransportError.PROTOCOL,
                message="upstream answered 2xx with a body that is not a chat completion",
            ))
        raw_usage = data.get("usage")
        usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
        return AttemptResult(
            outcome=Outcome(status=status),
            body=content,
            usage=Usage(
                input_tokens=int(usage.get("prompt_tokens") or 0),
                output_tokens=int(usage.get("completion_tokens") or 0),
            ),
        )
    etype, code, message = _error_fields(data)
    if not message and content and data is None:
        message = content[:300].decode("utf-8", "replace")
    hint = retry_after_s(headers, status=status, message=message, now_epoch_s=now_epoch_s)
    return AttemptResult(outcome=Outcome(
        status=status, error_type=etype, error_code=code, message=message, retry_after_s=hint,
    ))


_TRANSPORT_WORDS = {
    TransportError.CONNECT: "could not connect to the provider",
    TransportError.RESET: "the provider closed the connection",
    TransportError.ATTEMPT_TIMEOUT: "no answer within the attempt's time limit",
    TransportError.FIRST_TOKEN_TIMEOUT: "no first content within the time limit",
    TransportError.PROTOCOL: "the provider's answer could not be read",
}


def describe_error(exc: BaseException, kind: TransportError) -> str:
    """A transport failure as a fixed phrase and its cause's class name (`could not connect to the
    provider (ClientConnectorError)`).

    Allow-list: the exception's text is never used, since it carries host
    names, ports, resolved addresses and sometimes URLs (`turnout.scrub`).
    """
    cause = exc.__cause__ or exc
    return f"{_TRANSPORT_WORDS[kind]} ({type(cause).__name__})"


async def call_chat(
    client: httpx.AsyncClient,
    *,
    base_url: str,
    api_key: str,
    body: bytes,
    timeout_s: float,
    request_id: str,
) -> AttemptResult:
    """One non-streaming attempt: POST `{base_url}/chat/completions`.

    Args:
        client: the process's shared client.
        base_url: the provider's API root (no trailing slash needed).
        api_key: the credential for this provider (sent as Bearer; never
            logged or echoed).
        body: the JSON request body for this target (`upstream_body`).
        timeout_s: the whole attempt's time limit in seconds (connect + send +
            wait + read), from the loop's `Dispatch.timeout_s`.
        request_id: Turnout's request id, sent as `x-request-id`.

    Returns:
        An `AttemptResult`; never raises for upstream trouble (every httpx
        exception is mapped by `transport_error_of`). Cancellation propagates.
    """
    from turnout.adapters.exchange import post_request, send_json  # exchange imports this module's types

    request = post_request(
        client, base_url.rstrip("/") + "/chat/completions", content=body,
        headers={"authorization": f"Bearer {api_key}", "content-type": "application/json",
                 "x-request-id": request_id},
    )
    if isinstance(request, AttemptResult):
        return request
    return await send_json(client, request, timeout_s=timeout_s, read=outcome_of_response)
