"""What the client was answered, as the request page shows it: status, code, words and tokens.

Owns: the client-facing answer of a request derived from its attempt rows by SPEC §7's rules
(the records hold each attempt's upstream status, not the answer): served → 200 with the
serving attempt's tokens; a terminal upstream 4xx → that status; every failure a rate
limit → 429; the client gone → 499; otherwise 502 `provider_failed`. A budget deadline
(504) and `fallback.on_exhausted` answers are not told apart in the records: such a
request shows as the 502 it would otherwise have been. Pure: no I/O.
Must not import: FastAPI, Redis.
"""

from __future__ import annotations

from typing import Any

import msgspec

from turnout.core.attempt_phases import IN_FLIGHT_KIND

_TERMINAL_STATUS = {"auth": 401}


class ClientAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """The answer the client got.

    Attributes:
        status: HTTP status (None: the request is still running).
        code: the OpenAI-format error code or kind (None on success).
        text: the answer in words.
        input_tokens / output_tokens: the serving attempt's usage (0 when not served).
    """

    status: int | None
    code: str | None
    text: str
    input_tokens: int = 0
    output_tokens: int = 0


def client_answer(ordered: list[dict[str, Any]]) -> ClientAnswer:
    """The answer of the request whose attempt rows are `ordered` (in attempt order, at least one)."""
    last = ordered[-1]
    target = f"{last.get('provider')}/{last.get('served_model')}"
    kind, status = str(last.get("kind") or ""), last.get("status")
    upstream = f"{status}" if status is not None else "no status"
    if kind == "success":
        return ClientAnswer(
            status=200,
            code=None,
            text=f"served by {target}",
            input_tokens=int(last.get("input_tokens") or 0),
            output_tokens=int(last.get("output_tokens") or 0),
        )
    if kind == IN_FLIGHT_KIND:
        return ClientAnswer(status=None, code=None, text=f"in flight on {target}")
    if kind == "cancelled":
        return ClientAnswer(status=499, code="cancelled", text="the client left before the answer")
    if last.get("class") == "terminal":
        code = status if isinstance(status, int) and 400 <= status <= 599 else _TERMINAL_STATUS.get(kind, 400)
        return ClientAnswer(
            status=code,
            code=kind,
            text=f"the upstream provider {last.get('provider')} rejected the request ({upstream})",
        )
    if all(r.get("kind") == "rate_limited" for r in ordered):
        return ClientAnswer(
            status=429, code="rate_limited", text=f"every provider rate limited; last {target} ({upstream})"
        )
    return ClientAnswer(
        status=502,
        code="provider_failed",
        text=f"no provider could serve {last.get('requested_model')}; last attempt {target}: {upstream} {kind}".rstrip(),
    )
