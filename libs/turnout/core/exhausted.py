"""The exhausted answer: what the client gets when every attempt failed (SPEC §7, issue #45 item 4).

Owns: `policy.fallback.on_exhausted` (`OnExhausted`): `gateway` (the default) keeps Turnout's
own answer (502 `provider_failed`, or 429 when every failure was a rate limit, quoting the
attempts); `last` answers with the last attempt's upstream status and error; `original` with the
first attempt's, as the cause the chain started from. Also the one-line attempt summary that goes in the
`x-turnout-attempt-summary` header of such an answer, since its body is the upstream's.
Must not import: anything outside the standard library, msgspec and `turnout.core`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from turnout.core.loop import AttemptRecord
from turnout.core.policy import OnExhausted
from turnout.core.types import FailureKind

GATEWAY: Final = "gateway"

NO_STATUS: Final = {FailureKind.TIMEOUT: 504}
"""The status an upstream answer stands for when the chosen attempt received none (a timeout:
504; a connection failure or an unreadable body: 502 via `upstream_status`)."""

_TYPE_BY_STATUS: Final = {429: "rate_limit_error", 401: "authentication_error", 403: "permission_error"}


def chosen_attempt(records: Sequence[AttemptRecord], on_exhausted: OnExhausted) -> AttemptRecord | None:
    """The attempt whose error answers an exhausted plan: the last (`last`) or the first
    (`original`, the original error across every cycle); None for `gateway` or without any
    attempt (Turnout's own answer then stands)."""
    if on_exhausted == GATEWAY or not records:
        return None
    return records[-1] if on_exhausted == "last" else records[0]


def upstream_status(record: AttemptRecord) -> int:
    """The HTTP status the client gets for `record`'s error: the status the provider answered
    (400–599); else 504 for a timeout and 502 for anything else received without an error
    status (a connection failure, an unreadable body, an error inside a 2xx body)."""
    status = record.status
    if status is not None and 400 <= status <= 599:
        return status
    return NO_STATUS.get(record.kind, 502)


def upstream_error_type(record: AttemptRecord, status: int) -> str:
    """The error body's `type`: the provider's own (`error.type`) when it gave one, else one
    that names the status in OpenAI's words (`rate_limit_error`, `server_error`, ...)."""
    if record.error_type:
        return record.error_type
    return _TYPE_BY_STATUS.get(status, "server_error" if status >= 500 else "invalid_request_error")


def upstream_message(record: AttemptRecord) -> str:
    """The error body's `message`: the provider's own (already scrubbed of secrets by the
    adapter, as every quoted message), else what happened (`timeout`, `transport`)."""
    return record.message or f"{record.target.provider} failed: {record.kind}"


SUMMARY_HEADER_MAX_CHARS: Final = 4000
"""The longest `x-turnout-attempt-summary` (characters): proxies commonly refuse a response whose
headers pass 8 KiB, and an operator's ceilings may allow hundreds of attempts."""


def summary_header(records: Sequence[AttemptRecord], max_chars: int = SUMMARY_HEADER_MAX_CHARS) -> str:
    """The `x-turnout-attempt-summary` value: one `<n> <provider>/<model> <status, or - when none
    was received> <kind> <duration>ms` entry per attempt, joined by `, ` (e.g. `1 sim-a/x 503
    server_error 4ms, 2 sim-b/y 500 server_error 3ms`). Past `max_chars` the entries that fit are
    kept and `... N more` ends it (the body of a `gateway` answer, and the records, keep them
    all). ASCII as long as the names are; the shell still passes it through its header guard."""
    entries = [
        f"{r.number} {r.target.provider}/{r.target.model} "
        f"{r.status if r.status is not None else '-'} {r.kind} {round(r.duration_ms)}ms"
        for r in records
    ]
    text = ", ".join(entries)
    if len(text) <= max_chars:
        return text
    kept: list[str] = []
    for entry in entries:
        tail = f", ... {len(entries) - len(kept) - 1} more"
        if len(", ".join([*kept, entry])) + len(tail) > max_chars:
            break
        kept.append(entry)
    return ", ".join([*kept, f"... {len(entries) - len(kept)} more"])
