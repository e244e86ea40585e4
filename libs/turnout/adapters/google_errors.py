"""Google API error bodies (Gemini API, Vertex AI) read into an attempt's outcome.

Owns: `google_error_outcome`, the reading of a non-2xx answer of a Google API —
`{"error": {"code", "message", "status", "details"}}` — and `google_error_fields`, the
(type, message, retry hint) of such a body wherever it is found (an error status, or an
`error` object inside a stream). Must not import: `turnout.adapters.exchange`, services,
FastAPI, arq; no I/O, no clock (times are passed in).

What is read (https://ai.google.dev/gemini-api/docs/troubleshooting, https://cloud.google.com/apis/design/errors):

- the error's `status` (`RESOURCE_EXHAUSTED`, `UNAVAILABLE`, `DEADLINE_EXCEEDED`,
  `INVALID_ARGUMENT`, `PERMISSION_DENIED`, ...) is kept as the outcome's type and code, so an
  attempt record names it and an error inside a 2xx stream is classified by it
  (`turnout.core.classify`: `resource_exhausted` as a 429, `unavailable` a 503,
  `deadline_exceeded` a 504, `invalid_argument` a 400);
- the HTTP status classifies everything else as for any family: 429 a rate limit, 503 an
  overload, 504 a timeout, a 400 whose message says "input token count ... exceeds" or
  "exceeds the maximum number of tokens" a context-window failure, other 400s client errors;
- a `google.rpc.RetryInfo` detail's `retryDelay` (a protobuf Duration, `"20s"`, `"1.5s"`) is
  the retry hint, before any header or wording (`turnout.core.hints`);
- a `google.rpc.ErrorInfo` detail of reason `API_KEY_INVALID` (which Google sends with HTTP
  400) is read as a 401: a rejected key is a credential failure (BYOK's credential fallback,
  never a client error of the request).
"""

from __future__ import annotations

from typing import Any, Final

import httpx
import msgspec

from turnout.adapters.base import AttemptResult, error_status_outcome
from turnout.core.hints import MAX_HINT_S, parse_go_duration_s, retry_after_s
from turnout.core.types import Outcome

_decode = msgspec.json.Decoder()
RETRY_INFO: Final = "type.googleapis.com/google.rpc.RetryInfo"
"""The `@type` of the detail carrying `retryDelay`."""
ERROR_INFO: Final = "type.googleapis.com/google.rpc.ErrorInfo"
"""The `@type` of the detail carrying `reason`."""
KEY_REASONS: Final = frozenset({"API_KEY_INVALID", "API_KEY_SERVICE_BLOCKED"})
"""`ErrorInfo.reason`s of a rejected key (read as a 401)."""


def _details(err: dict[str, Any]) -> list[dict[str, Any]]:
    details = err.get("details")
    return [d for d in details if isinstance(d, dict)] if isinstance(details, list) else []


def retry_delay_s(err: dict[str, Any]) -> float | None:
    """The `RetryInfo.retryDelay` of an error object, in seconds (None: none, or not sane)."""
    for detail in _details(err):
        delay = detail.get("retryDelay")
        if detail.get("@type") == RETRY_INFO and isinstance(delay, str):
            seconds = parse_go_duration_s(delay)
            if seconds is not None and seconds <= MAX_HINT_S:
                return seconds
    return None


def key_rejected(err: dict[str, Any]) -> bool:
    """True when an error object's `ErrorInfo.reason` says the key was refused (`KEY_REASONS`)."""
    return any(d.get("@type") == ERROR_INFO and d.get("reason") in KEY_REASONS for d in _details(err))


def google_error_fields(data: Any) -> tuple[str | None, str, float | None, bool] | None:
    """(status name, message, retry delay in seconds, key rejected) of a Google error body
    `{"error": {"code", "message", "status", "details"}}`, or None when `data` is not one."""
    err = data.get("error") if isinstance(data, dict) else None
    code = err.get("code") if isinstance(err, dict) else None
    if not isinstance(err, dict) or not isinstance(code, int) or not isinstance(err.get("message", ""), str):
        return None  # Google's errors carry their HTTP status as `code` (Anthropic's, on Vertex AI, do not)
    status = err.get("status")
    return (
        status if isinstance(status, str) and status else None,
        str(err.get("message", "")),
        retry_delay_s(err),
        key_rejected(err),
    )


def google_error_outcome(status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float) -> AttemptResult:
    """The result of a non-2xx answer of a Google API (pure).

    Args:
        status: HTTP status (not 2xx).
        headers: response headers (`Retry-After`, when a proxy adds one).
        content: the body.
        now_epoch_s: current time, epoch seconds (hint dates).

    Returns:
        The outcome with the provider's status (401 for a rejected key, module doc), the
        error's `status` name as type and code, its message, and the retry hint (`RetryInfo`
        first). A body that is not Google's is read as any family's (`error_status_outcome`).
    """
    try:
        data = _decode.decode(content) if content else None
    except msgspec.DecodeError:
        data = None
    fields = google_error_fields(data)
    if fields is None:
        return error_status_outcome(status, headers, content, now_epoch_s)
    name, message, delay_s, rejected = fields
    hint = (
        delay_s
        if delay_s is not None
        else retry_after_s(headers, status=status, message=message, now_epoch_s=now_epoch_s)
    )
    return AttemptResult(
        outcome=Outcome(
            status=401 if rejected else status,
            error_type=name,
            error_code=name,
            message=message,
            retry_after_s=hint,
        )
    )
