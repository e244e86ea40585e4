"""The loop's vocabulary: the steps it asks the shell for and the records it keeps (SPEC §3, §5, §9).

Owns: why a loop stopped (`StopReason`) or passed over a target (`SkipReason`), the three
steps `turnout.core.loop.next_step` returns (`Dispatch`, `Wait`, `GiveUp`), and the decision
records of attempts (`AttemptRecord`, built by `attempt_record`) and of skipped targets
(`SkipRecord`). `turnout.core.loop` re-exports every name.
Must not import: anything outside the standard library, msgspec and `turnout.core`.
"""

from __future__ import annotations

import enum

import msgspec

from turnout.core.classify import DISPOSITION
from turnout.core.considered import Considered
from turnout.core.plan import PlanEntry, Role
from turnout.core.types import Disposition, FailureKind, Outcome, Target


class StopReason(enum.StrEnum):
    """Why the loop ended (SPEC §3 step 5, §7)."""

    SERVED = "served"
    TERMINAL = "terminal"  # a terminal outcome: answer with it now
    EXHAUSTED = "exhausted"  # plan or max_attempts used up, or fallback not allowed
    DEADLINE = "deadline"  # the budget's wall-clock deadline
    ALL_OPEN = "all_open"  # every target skipped: OPEN, resting or outside its slow-start share
    CANCELLED = "cancelled"  # the client went away


class SkipReason(enum.StrEnum):
    """Why a target was passed over without an attempt."""

    CIRCUIT_OPEN = "circuit_open"  # OPEN, or HALF_OPEN with another process's probe in flight
    RESTING = "resting"  # the provider's Retry-After ("not before") holds fleet-wide
    RAMPING = "ramping"  # slow start after a close left this attempt out
    NO_CREDENTIAL = "no_credential"
    CREDENTIAL_OPEN = "credential_open"  # the tenant's own key keeps failing (SPEC §5 "What counts")
    PLAN_CAPPED = "plan_capped"  # the account's usage cap has not reset yet (SPEC §10 plan-cap continuity)
    UNSUPPORTED = "unsupported"  # the target's API has no form for a field of the request (Anthropic: `n` > 1)


UNAVAILABLE_SKIPS = frozenset({SkipReason.CIRCUIT_OPEN, SkipReason.RESTING, SkipReason.RAMPING})
"""Skips that say "this target is out of rotation for a while": a plan ended
by them alone answers 503 with Retry-After (SPEC §5)."""


class AttemptRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The decision record of one attempt (SPEC §9 fields the loop knows).

    Attributes:
        number: attempt number within the request, from 1.
        target: the target attempted.
        role: its role in the plan.
        is_retry: same target as the previous attempt.
        is_fallback: a target other than the primary.
        is_reroute: the target's model came from a reroute list.
        resend_count: retries of this target before this attempt (0 first).
        cycle: pass over the plan, from 1.
        kind: the classified outcome.
        disposition: the SPEC §3 class of `kind`.
        status: upstream HTTP status, or None (transport failure).
        error_code: provider error code, or None.
        error_type: provider error type (`error.type`), or None.
        message: provider's error message ("" on success).
        retry_after_s: the hint this response carried, seconds, or None.
        delay_before_s: seconds waited before this attempt.
        delay_reason: "backoff", "retry_after", "fallback_backoff" or None.
        started_s: loop clock when the attempt started (seconds).
        duration_ms: how long the attempt took.
        is_byok_fallback: made on the shared key after the tenant's own key
            was rejected on this target (SPEC §6 credential fallback).
        is_plan_fallback: a `plan_fallbacks` target, after a quota or
            usage-cap failure (SPEC §10 plan-cap continuity).
        is_strategy: a spend strategy's rule chose its model (SPEC §10).
        should_retry: the provider's `x-should-retry` on this attempt (`Outcome.should_retry`).
        considered: the plan's offers not attempted as of this attempt's end, and why
            (`turnout.core.considered`); the request's last record holds the request's.
        first_token_ms: a committed stream's time to its first chunk (ms, the attempt's duration
            at its commit point), or None (not a stream).
    """

    number: int
    target: Target
    role: Role
    is_retry: bool
    is_fallback: bool
    is_reroute: bool
    resend_count: int
    cycle: int
    kind: FailureKind
    disposition: Disposition
    status: int | None
    error_code: str | None
    message: str
    retry_after_s: float | None
    delay_before_s: float
    delay_reason: str | None
    started_s: float
    duration_ms: float
    is_byok_fallback: bool = False
    is_plan_fallback: bool = False
    is_strategy: bool = False
    should_retry: bool | None = None
    error_type: str | None = None
    considered: tuple[Considered, ...] = ()
    first_token_ms: float | None = None

    @property
    def is_comparable(self) -> bool:
        """Made on a comparable alternate (`Role.COMPARABLE_ALTERNATE`, `turnout.core.alternates`)."""
        return self.role is Role.COMPARABLE_ALTERNATE


class SkipRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A target passed over without an attempt (not counted as one).

    Attributes:
        target: the target skipped.
        reason: why.
        reopen_in_s: for an unavailable target (`UNAVAILABLE_SKIPS`), seconds
            until it may be attempted again.
        detail: for UNSUPPORTED, what the target's API cannot express ("" otherwise).
        param: for UNSUPPORTED, the request field it names, or None.
    """

    target: Target
    reason: SkipReason
    reopen_in_s: float | None = None
    detail: str = ""
    param: str | None = None


class Dispatch(msgspec.Struct, frozen=True, kw_only=True):
    """Attempt `entry` now, with at most `timeout_s` seconds.

    Attributes:
        entry: the plan entry to attempt.
        number: the attempt number this will be (from 1).
        timeout_s: `min(per_attempt_timeout_ms, time left)` in seconds.
        is_retry: same target as the previous attempt.
        resend_count: retries of this target before this attempt.
        delay_before_s: seconds waited before it (for the record).
        delay_reason: why it waited, or None.
        is_byok_fallback: use the credential fallback (the shared key) on
            this target, its own key having been rejected.
    """

    entry: PlanEntry
    number: int
    timeout_s: float
    is_retry: bool
    resend_count: int
    delay_before_s: float
    delay_reason: str | None
    is_byok_fallback: bool = False


class Wait(msgspec.Struct, frozen=True, kw_only=True):
    """Sleep `delay_s` seconds, then ask again. Never ends past the deadline."""

    delay_s: float
    reason: str


class GiveUp(msgspec.Struct, frozen=True, kw_only=True):
    """The loop is over; `conclude` turns the state into the answer."""

    reason: StopReason


Step = Dispatch | Wait | GiveUp


def attempt_record(
    dispatch: Dispatch, outcome: Outcome, kind: FailureKind, *, cycle: int, started_s: float, now_s: float
) -> AttemptRecord:
    """The decision record of one performed dispatch (times in seconds of the loop clock).

    `is_fallback` is the entry's, but for the request's first attempt on another provider of
    the requested model: the targets before it were skipped (out of rotation, slow start, an
    API that cannot express the request), not tried, and a target a plan leaves out for being
    out of rotation makes the next provider its primary (SPEC §5: skipped, not tried).
    """
    entry = dispatch.entry
    first_in_place = dispatch.number == 1 and entry.role is Role.PROVIDER_FALLBACK
    return AttemptRecord(
        number=dispatch.number,
        target=entry.target,
        role=entry.role,
        is_retry=dispatch.is_retry,
        is_fallback=entry.is_fallback and not first_in_place,
        is_reroute=entry.is_reroute,
        resend_count=dispatch.resend_count,
        cycle=cycle,
        kind=kind,
        disposition=DISPOSITION[kind],
        status=outcome.status,
        error_code=outcome.error_code,
        error_type=outcome.error_type,
        message=outcome.message,
        retry_after_s=outcome.retry_after_s,
        should_retry=outcome.should_retry,
        delay_before_s=dispatch.delay_before_s,
        delay_reason=dispatch.delay_reason,
        started_s=started_s,
        duration_ms=max(0.0, (now_s - started_s) * 1000.0),
        is_byok_fallback=dispatch.is_byok_fallback,
        is_plan_fallback=entry.role is Role.PLAN_FALLBACK,
        is_strategy=entry.is_strategy,
    )
