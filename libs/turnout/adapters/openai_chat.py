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

from turnout.adapters.base import AttemptResult, Usage, error_fields
from turnout.adapters.exchange import send_json
from turnout.core.hints import retry_after_s
from turnout.core.types import Outcome, TransportError

_decode = msgspec.json.Decoder()


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
            etype, code, message = error_fields(data)
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
    etype, code, message = error_fields(data)
    if not message and content and data is None:
        message = content[:300].decode("utf-8", "replace")
    hint = retry_after_s(headers, status=status, message=message, now_epoch_s=now_epoch_s)
    return AttemptResult(outcome=Outcome(
        status=status, error_type=etype, error_code=code, message=message, retry_after_s=hint,
    ))


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
    request = client.build_request(
        "POST", base_url.rstrip("/") + "/chat/completions", content=body,
        headers={"authorization": f"Bearer {api_key}", "content-type": "application/json",
                 "x-request-id": request_id},
    )
    return await send_json(client, request, timeout_s=timeout_s, read=outcome_of_response)
