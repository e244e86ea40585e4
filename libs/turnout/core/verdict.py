"""Verdict: what the client is told when the attempt loop ends (SPEC §7).

Owns: the mapping from a stopped loop to the HTTP status, OpenAI-format error
fields, Retry-After and the facts behind Turnout's response headers.
Must not import: anything outside the standard library, msgspec and
`turnout.core`.
"""

from __future__ import annotations

import math

import msgspec

from turnout.core.exhausted import chosen_attempt, upstream_error_type, upstream_message, upstream_status
from turnout.core.loop import UNAVAILABLE_SKIPS, AttemptRecord, LoopState, SkipReason, SkipRecord, StopReason
from turnout.core.types import FailureKind

_TERMINAL_TYPE = {
    FailureKind.AUTH: "authentication_error",
    FailureKind.CLIENT_ERROR: "invalid_request_error",
    FailureKind.CONTEXT_LENGTH: "invalid_request_error",
    FailureKind.CONTENT_POLICY: "invalid_request_error",
}

_TERMINAL_CODE = {FailureKind.CONTEXT_LENGTH: "context_length_exceeded"}
"""The OpenAI `code` a terminal kind always answers with, whatever the provider called it
(Bedrock's `ValidationException`, Anthropic's none): OpenAI's code for a prompt over the
model's context window, which OpenAI-format clients test for."""

_TERMINAL_STATUS = {FailureKind.AUTH: 401}
"""Status of a terminal error that came without an error status (an error
envelope inside a 2xx body, SPEC §3); other terminal kinds answer 400."""


class AttemptSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One row of the per-attempt summary in an error body (SPEC §7)."""

    attempt: int
    provider: str
    model: str
    status: int | None
    kind: str
    disposition: str
    duration_ms: int


class Served(msgspec.Struct, frozen=True, kw_only=True):
    """Facts for the response headers (SPEC §7), success or error.

    Attributes:
        provider / model: who served (or was tried last); None when nothing
            was attempted.
        attempts: attempts made.
        fallback: the last attempt was on a fallback target.
        reroute: the last attempt's model came from a reroute list.
        byok_fallback: the last attempt carried the shared key after the
            tenant's own key was rejected (SPEC §6 credential fallback).
        plan_fallback: the last attempt was on a `plan_fallbacks` target
            (SPEC §10 plan-cap continuity).
        strategy: the spend strategy rule that chose the last attempt's
            model, or None (SPEC §10).
        comparable: the last attempt was on a comparable alternate (`fallback.comparable`,
            `turnout.core.alternates`).
    """

    provider: str | None
    model: str | None
    attempts: int
    fallback: bool
    reroute: bool
    byok_fallback: bool = False
    plan_fallback: bool = False
    strategy: str | None = None
    comparable: bool = False


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """The answer to the client when the loop did not serve.

    Attributes:
        status_code: HTTP status for the client.
        error_type / error_code / message: the OpenAI-format error fields.
        retry_after_s: whole seconds for a `Retry-After` header, or None.
        should_retry: value of `x-should-retry` (False after an exhausted chain).
        summary: per-attempt rows, one per attempt made.
        served: facts for the `x-turnout-*` headers.
        param: the request field the error names (the body's `param`), or None.
        upstream: `last` or `original` when the answer is that upstream attempt's status and
            error (`fallback.on_exhausted`, `turnout.core.exhausted`): the body then carries no
            summary, the shell puts it in a header; None for the gateway's own answers.
    """

    status_code: int
    error_type: str
    error_code: str | None
    message: str
    retry_after_s: int | None
    should_retry: bool | None
    summary: tuple[AttemptSummary, ...]
    served: Served
    param: str | None = None
    upstream: str | None = None


def served_facts(state: LoopState) -> Served:
    """Facts for `x-turnout-provider / -model / -attempts / -fallback / -reroute`."""
    last = state.records[-1] if state.records else None
    return Served(
        provider=last.target.provider if last else None,
        model=last.target.model if last else None,
        attempts=len(state.records),
        fallback=bool(last and last.is_fallback),
        reroute=bool(last and last.is_reroute),
        byok_fallback=bool(last and last.is_byok_fallback),
        plan_fallback=bool(last and last.is_plan_fallback),
        strategy=state.plan.strategy if last and last.is_strategy else None,
        comparable=bool(last and last.is_comparable),
    )


def summarize(records: tuple[AttemptRecord, ...]) -> tuple[AttemptSummary, ...]:
    """The per-attempt summary rows of an error body."""
    return tuple(
        AttemptSummary(
            attempt=r.number,
            provider=r.target.provider,
            model=r.target.model,
            status=r.status,
            kind=str(r.kind),
            disposition=str(r.disposition),
            duration_ms=round(r.duration_ms),
        )
        for r in records
    )


def _ceil_s(value: float) -> int:
    return max(1, math.ceil(value))


def _describe(record: AttemptRecord) -> str:
    status = record.status if record.status is not None else str(record.kind)
    detail = f": {record.message}" if record.message else ""
    return f"{record.target.provider}/{record.target.model} answered {status}{detail}"


def _quoted(records: tuple[AttemptRecord, ...]) -> tuple[str, AttemptRecord] | None:
    """The attempt an exhausted answer quotes, and the word that labels it.

    One pass over the plan: the last attempt ("last"). More than one pass
    (`fallback.max_cycles` > 1, SPEC §3 step 5): the original error, the
    first attempt's ("original"); the later ones stay in the body's
    per-attempt summary (`error.attempts`). None without any attempt.
    """
    if not records:
        return None
    if records[-1].cycle > 1:
        return "original", records[0]
    return "last", records[-1]


def client_retry_after_s(wait_s: float, draw: float) -> int:
    """The Retry-After (whole seconds) for "every target is out of rotation" (SPEC §5).

    No earlier than the first target's return, spread over one more such
    wait (at least 1 s) so clients that obey it do not all come back in the
    same second: `ceil(wait_s + draw * max(1, wait_s))`, at least 1.

    Args:
        wait_s: seconds until the first target may be attempted again.
        draw: a uniform number in [0, 1) (the caller's RNG; 0.0: no jitter).
    """
    wait = max(wait_s, 0.0)
    return _ceil_s(wait + min(max(draw, 0.0), 1.0) * max(1.0, wait))


def _refusals(skips: list[SkipRecord]) -> str:
    """`a, b: what they cannot express. c: ...`: each distinct refusal once, after the
    providers that gave it, in plan order (a provider named once per refusal)."""
    by_detail: dict[str, dict[str, None]] = {}
    for skip in skips:
        by_detail.setdefault(skip.detail or "cannot express the request.", {})[skip.target.provider] = None
    return " ".join(f"{', '.join(providers)}: {detail}" for detail, providers in by_detail.items())


def conclude(state: LoopState, reason: StopReason, *, draw: float = 0.0) -> Verdict:
    """Turn a stopped loop into the client's error answer (SPEC §7).

    Args:
        state: the final state.
        reason: the `GiveUp` reason (any but SERVED).
        draw: uniform in [0, 1) to jitter the ALL_OPEN Retry-After
            (`client_retry_after_s`).

    Returns:
        - TERMINAL: the provider's status, its message quoted.
        - EXHAUSTED with every failure a rate limit: 429, Retry-After from the
          shortest hint seen (else the shortest breaker reopen, else 1 s).
        - EXHAUSTED with no attempt made and a target whose API cannot express
          the request (an UNSUPPORTED skip): 400 `unsupported_by_providers`,
          naming every such target's provider beside what it cannot express
          (`_refusals`), and the first one's field (`param`); no provider was
          asked, so no retry can succeed.
        - EXHAUSTED otherwise (also a reroute list exhausted): 502
          `provider_failed` with the last attempt and the summary.
        Both EXHAUSTED answers quote the original (first) attempt instead of
        the last when the plan was run more than once (`max_cycles`; see
        `_quoted`). With `fallback.on_exhausted` `last` or `original`, an
        EXHAUSTED plan with attempts answers instead with that attempt's
        upstream status, error type, code and message (`upstream` set;
        `x-should-retry` and Retry-After as the answer it replaces: true with
        the rate-limit hint when every failure was a rate limit, else false).
        - DEADLINE: 504 `budget_exhausted` with the summary.
        - ALL_OPEN: 503 `circuit_open`, Retry-After no earlier than the
          first target's return, jittered (`client_retry_after_s`).
        - CANCELLED: 499 (nobody is listening; kept for records).
    """
    records = state.records
    last = records[-1] if records else None
    summary, served = summarize(records), served_facts(state)
    reopen = [s.reopen_in_s for s in state.skips if s.reason in UNAVAILABLE_SKIPS and s.reopen_in_s is not None]
    model = state.plan.requested_model
    if reason is StopReason.TERMINAL and last is not None:
        return _terminal(last, summary, served)
    if reason is StopReason.ALL_OPEN:
        return _all_open(model, client_retry_after_s(min(reopen) if reopen else 1.0, draw), summary, served)
    if reason is StopReason.DEADLINE:
        return _deadline(model, records, summary, served)
    if reason is StopReason.CANCELLED:
        return _cancelled(summary, served)
    unsupported = [s for s in state.skips if s.reason is SkipReason.UNSUPPORTED]
    if not records and unsupported:
        return _unsupported(model, unsupported, summary, served)
    return _exhausted(state, reopen, summary, served)


def _terminal(last: AttemptRecord, summary: tuple[AttemptSummary, ...], served: Served) -> Verdict:
    """A terminal outcome: the provider's status, its message quoted."""
    status = last.status if last.status is not None and 400 <= last.status <= 599 else None
    return Verdict(
        status_code=status if status is not None else _TERMINAL_STATUS.get(last.kind, 400),
        error_type=_TERMINAL_TYPE.get(last.kind, "invalid_request_error"),
        error_code=_TERMINAL_CODE.get(last.kind, last.error_code),
        message=f"The upstream provider {last.target.provider} rejected the request: {last.message or last.kind}",
        retry_after_s=None,
        should_retry=False,
        summary=summary,
        served=served,
    )


def _all_open(model: str, retry_after: int, summary: tuple[AttemptSummary, ...], served: Served) -> Verdict:
    """Every target out of rotation: 503 with the (jittered) `retry_after` seconds."""
    return Verdict(
        status_code=503,
        error_type="service_unavailable",
        error_code="circuit_open",
        message=f"Every provider of `{model}` is temporarily out of rotation; retry after {retry_after} s.",
        retry_after_s=retry_after,
        should_retry=True,
        summary=summary,
        served=served,
    )


def _deadline(
    model: str, records: tuple[AttemptRecord, ...], summary: tuple[AttemptSummary, ...], served: Served
) -> Verdict:
    """The time budget ran out: 504 with the last attempt described."""
    last = records[-1] if records else None
    return Verdict(
        status_code=504,
        error_type="timeout_error",
        error_code="budget_exhausted",
        message=f"The request's time budget ran out after {len(records)} attempt(s) for `{model}`"
        + (f"; last: {_describe(last)}" if last else "."),
        retry_after_s=None,
        should_retry=False,
        summary=summary,
        served=served,
    )


def _cancelled(summary: tuple[AttemptSummary, ...], served: Served) -> Verdict:
    """The client went away: 499, for the records."""
    return Verdict(
        status_code=499,
        error_type="cancelled",
        error_code="client_closed_request",
        message="The client closed the request.",
        retry_after_s=None,
        should_retry=None,
        summary=summary,
        served=served,
    )


def _unsupported(
    model: str, unsupported: list[SkipRecord], summary: tuple[AttemptSummary, ...], served: Served
) -> Verdict:
    """No target's API can express the request and none was called: 400 naming each refusal."""
    return Verdict(
        status_code=400,
        error_type="invalid_request_error",
        error_code="unsupported_by_providers",
        message=f"No provider of `{model}` can take this request as sent (none was called): " + _refusals(unsupported),
        retry_after_s=None,
        should_retry=False,
        summary=summary,
        served=served,
        param=unsupported[0].param,
    )


def _exhausted(state: LoopState, reopen: list[float], summary: tuple[AttemptSummary, ...], served: Served) -> Verdict:
    """The plan or the budget used up: the chosen attempt's own answer (`on_exhausted`), 429
    when every failure was a rate limit, else 502 (see `conclude`)."""
    records, model = state.records, state.plan.requested_model
    quoted = _quoted(records)
    rate_limited = bool(records) and all(r.kind is FailureKind.RATE_LIMITED for r in records)
    hints = [r.retry_after_s for r in records if r.retry_after_s is not None]
    wait_s = min(hints) if hints else (min(reopen) if reopen else 1.0)
    on_exhausted = state.policy.fallback.on_exhausted
    chosen = chosen_attempt(records, on_exhausted)
    if chosen is not None:
        status = upstream_status(chosen)
        return Verdict(
            status_code=status,
            error_type=upstream_error_type(chosen, status),
            error_code=chosen.error_code,
            message=upstream_message(chosen),
            retry_after_s=_ceil_s(wait_s) if rate_limited else None,
            should_retry=rate_limited,
            summary=summary,
            served=served,
            upstream=on_exhausted,
        )
    if rate_limited and quoted is not None:
        return Verdict(
            status_code=429,
            error_type="rate_limit_error",
            error_code="rate_limit_exceeded",
            message=f"Every provider of `{model}` is rate limiting; {quoted[0]}: {_describe(quoted[1])}",
            retry_after_s=_ceil_s(wait_s),
            should_retry=True,
            summary=summary,
            served=served,
        )
    return Verdict(
        status_code=502,
        error_type="upstream_error",
        error_code="provider_failed",
        message=f"No provider could serve `{model}` after {len(records)} attempt(s)"
        + (
            f"; the gateway made every attempt its policy and the targets' health allowed "
            f"(a request sent later may succeed). "
            f"{quoted[0].capitalize()}: {_describe(quoted[1])}"
            if quoted
            else ". No target had a usable credential; a retry cannot succeed until a key is configured."
        ),
        retry_after_s=None,
        should_retry=False,
        summary=summary,
        served=served,
    )
