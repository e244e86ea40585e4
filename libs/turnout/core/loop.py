"""The attempt loop as a pure state machine (SPEC §3 steps 2–5, §5 skipping).

Owns: what to do next (dispatch a target, wait, give up), how an outcome or a
skipped target changes the loop's state, and the decision record of every
attempt. The shell (`turnout.router`) performs the steps: it dispatches
through an adapter, sleeps through an injected sleep, asks the breaker for
admission, and feeds the results back here.
Must not import: anything outside the standard library, msgspec and
`turnout.core`. Time is a float of seconds passed in (any monotonic origin,
the same for every call on one state); randomness is a `random.Random`.

Usage by the shell::

    state = begin(plan, policy, deadline_s=now + budget)
    while not isinstance(step := next_step(state, now()), GiveUp):
        if isinstance(step, Wait): await sleep(step.delay_s); continue
        # admission refused -> state = on_skip(state, step, ...); continue
        outcome = await adapter.call(step.entry.target, timeout_s=step.timeout_s)
        state = on_outcome(state, step, outcome, started_s, now(), rng)
"""

from __future__ import annotations

import enum
import random
from typing import Final

import msgspec

from turnout.core.backoff import retry_delay
from turnout.core.classify import DISPOSITION, classify, status_for_lists, status_matches
from turnout.core.considered import Considered, considered_so_far
from turnout.core.plan import Plan, PlanEntry, Role
from turnout.core.policy import Policy
from turnout.core.types import Disposition, FailureKind, Outcome, Target, TransportError


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


class LoopState(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the loop knows about one request. Replaced, never mutated.

    Attributes:
        plan: the request's plan.
        policy: the policy in force (already clamped).
        deadline_s: loop-clock time after which nothing starts or sleeps.
        sequence: the entries being walked: `plan.entries`, or a special
            fallback list after a context-length / content-policy failure.
        special: the sequence is a special fallback list (no second switch).
        cursor: index of the current entry in `sequence`.
        cycle: pass over the plan, from 1 (SPEC §3 step 5 `max_cycles`).
        resend_count: retries already made on the current entry.
        wait_until_s: no dispatch before this time, or None.
        delay_s / delay_reason: the wait pending before the next attempt.
        records: every attempt so far.
        skips: every skipped target so far.
        stop: why the loop ended, or None while it runs.
        byok_fallback: the current entry's tenant key was rejected: its
            next attempts carry the shared key (until the loop moves on).
    """

    plan: Plan
    policy: Policy
    deadline_s: float
    sequence: tuple[PlanEntry, ...]
    special: bool = False
    cursor: int = 0
    cycle: int = 1
    resend_count: int = 0
    wait_until_s: float | None = None
    delay_s: float = 0.0
    delay_reason: str | None = None
    records: tuple[AttemptRecord, ...] = ()
    skips: tuple[SkipRecord, ...] = ()
    stop: StopReason | None = None
    byok_fallback: bool = False


def begin(plan: Plan, policy: Policy, *, deadline_s: float) -> LoopState:
    """Start the loop over `plan`; `deadline_s` is on the caller's loop clock."""
    state = LoopState(plan=plan, policy=policy, deadline_s=deadline_s, sequence=plan.entries)
    if not plan.entries:
        return msgspec.structs.replace(state, stop=StopReason.EXHAUSTED)
    return state


def next_step(state: LoopState, now_s: float) -> Step:
    """What to do now (SPEC §3 step 2).

    Returns:
        `GiveUp` once the loop stopped, `max_attempts` is used up, or the
        deadline has passed; `Wait` while a backoff is pending; else
        `Dispatch` of the current entry with timeout
        `min(per_attempt_timeout_ms, time left)`.
    """
    if state.stop is not None:
        return GiveUp(reason=state.stop)
    if len(state.records) >= state.policy.budget.max_attempts:
        return GiveUp(reason=StopReason.EXHAUSTED)
    if now_s >= state.deadline_s:
        return GiveUp(reason=StopReason.DEADLINE)
    if state.wait_until_s is not None and now_s < state.wait_until_s:
        return Wait(delay_s=state.wait_until_s - now_s, reason=state.delay_reason or "backoff")
    per_attempt_s = state.policy.retry.per_attempt_timeout_s
    return Dispatch(
        entry=state.sequence[state.cursor],
        number=len(state.records) + 1,
        timeout_s=min(per_attempt_s, state.deadline_s - now_s),
        is_retry=state.resend_count > 0,
        resend_count=state.resend_count,
        delay_before_s=state.delay_s,
        delay_reason=state.delay_reason,
        is_byok_fallback=state.byok_fallback,
    )


def _retry_allowance(state: LoopState, entry: PlanEntry) -> int:
    retry = state.policy.retry
    return retry.max_retries if entry.role is Role.PRIMARY else retry.fallback_target_retries


def _advance(state: LoopState, now_s: float, *, backoff: bool) -> LoopState:
    """Move to the next entry (fallback, or fall-through after a skip)."""
    cursor, cycle = state.cursor + 1, state.cycle
    if cursor >= len(state.sequence):
        if state.special or cycle >= state.policy.fallback.max_cycles:
            return msgspec.structs.replace(state, stop=StopReason.EXHAUSTED)
        cursor, cycle = 0, cycle + 1
    moved = msgspec.structs.replace(
        state,
        cursor=cursor,
        cycle=cycle,
        resend_count=0,
        wait_until_s=None,
        delay_s=0.0,
        delay_reason=None,
        byok_fallback=False,
    )
    backoff_s = state.policy.fallback.backoff_s if backoff else 0.0
    if backoff_s > 0:
        if now_s + backoff_s >= state.deadline_s:
            return msgspec.structs.replace(moved, stop=StopReason.DEADLINE)
        return msgspec.structs.replace(
            moved, wait_until_s=now_s + backoff_s, delay_s=backoff_s, delay_reason="fallback_backoff"
        )
    return moved


def _may_fall_back(state: LoopState, outcome: Outcome, kind: FailureKind) -> bool:
    fallback = state.policy.fallback
    if not fallback.enabled:
        return False
    if kind in (FailureKind.QUOTA_EXHAUSTED, FailureKind.NO_CREDENTIAL):
        return True  # decided by the class, not by the status lists (SPEC §3)
    return status_matches(status_for_lists(outcome, kind, purpose="fallback"), fallback.on_status)


def _switch_special(state: LoopState, entries: tuple[PlanEntry, ...]) -> LoopState:
    return msgspec.structs.replace(
        state,
        sequence=entries,
        special=True,
        cursor=0,
        resend_count=0,
        wait_until_s=None,
        delay_s=0.0,
        delay_reason=None,
        byok_fallback=False,
    )


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


def on_outcome(
    state: LoopState,
    dispatch: Dispatch,
    outcome: Outcome,
    *,
    started_s: float,
    now_s: float,
    rng: random.Random,
    kind: FailureKind | None = None,
    credential_fallback: bool = False,
) -> LoopState:
    """Record an attempt's outcome and decide what follows (SPEC §3 steps 3–5).

    Args:
        state: the state `dispatch` came from.
        dispatch: the step that was performed.
        outcome: what the adapter observed.
        started_s: loop clock when the attempt started.
        now_s: loop clock now (after the attempt).
        rng: jitter source for a retry's backoff.
        kind: a classification decided by the shell (e.g. CANCELLED); None
            classifies `outcome` with the default table.
        credential_fallback: the attempt carried the tenant's own key and the
            shared key may follow it (`turnout.core.credentials`): a
            rejected key (AUTH) then leads to one more attempt on the same
            target with the shared key instead of a terminal answer, budget
            permitting (SPEC §6).

    Returns:
        The next state: stopped (success, terminal, exhausted, cancelled, or
        deadline when a failed attempt ends at or past it), a retry of the same target after a delay (only when the
        status is in `retry_on_status`, the target has retries left, attempts
        remain, and the retry starts before the deadline), or the next target
        (when fallback is enabled and allowed for this failure), after
        `fallback.backoff_ms`.
    """
    kind = classify(outcome) if kind is None else kind
    entry = dispatch.entry
    record = attempt_record(dispatch, outcome, kind, cycle=state.cycle, started_s=started_s, now_s=now_s)
    record = msgspec.structs.replace(record, considered=_considered(state, record))
    state = msgspec.structs.replace(
        state, records=state.records + (record,), wait_until_s=None, delay_s=0.0, delay_reason=None
    )
    disposition = record.disposition
    if kind is FailureKind.CANCELLED:
        return msgspec.structs.replace(state, stop=StopReason.CANCELLED)
    if disposition is Disposition.SUCCESS:
        return msgspec.structs.replace(state, stop=StopReason.SERVED)
    if (
        kind is FailureKind.AUTH
        and credential_fallback
        and not state.byok_fallback
        and len(state.records) < state.policy.budget.max_attempts
        and now_s < state.deadline_s
    ):
        return msgspec.structs.replace(state, byok_fallback=True)
    if disposition is Disposition.TERMINAL:
        # A special list leaves the first model: only with fallback enabled.
        may_switch = not state.special and state.policy.fallback.enabled
        if may_switch and kind is FailureKind.CONTEXT_LENGTH and state.plan.context_window:
            return _switch_special(state, state.plan.context_window)
        if may_switch and kind is FailureKind.CONTENT_POLICY and state.plan.content_policy:
            return _switch_special(state, state.plan.content_policy)
        if not _listed(state, outcome, kind):
            return msgspec.structs.replace(state, stop=StopReason.TERMINAL)
    if now_s >= state.deadline_s or _timed_out_at_deadline(state, dispatch, outcome):
        return msgspec.structs.replace(state, stop=StopReason.DEADLINE)
    if kind is FailureKind.QUOTA_EXHAUSTED and _may_switch_to_plan_cap(state):
        return _switch_special(state, state.plan.plan_cap)
    if _may_retry(state, disposition, outcome, kind):
        retried = _try_retry(state, entry, outcome, kind, now_s, rng)
        if retried is not None:
            return retried
    if not _may_fall_back(state, outcome, kind):  # a terminal status retried as listed ends as itself
        stop = StopReason.TERMINAL if disposition is Disposition.TERMINAL else StopReason.EXHAUSTED
        return msgspec.structs.replace(state, stop=stop)
    return _advance(state, now_s, backoff=True)


def _considered(state: LoopState, record: AttemptRecord) -> tuple[Considered, ...]:
    skips = ((s.target, str(s.reason), s.reopen_in_s) for s in state.skips)
    tried = (r.target for r in (*state.records, record))
    return considered_so_far(state.plan.left_out, (e.target for e in state.sequence), tried, skips)


def _timed_out_at_deadline(state: LoopState, dispatch: Dispatch, outcome: Outcome) -> bool:
    """An attempt timeout whose limit was the time left (not the per-attempt
    limit) is the budget running out, even if the timer fired a hair early."""
    per_attempt_s = state.policy.retry.per_attempt_timeout_s
    return outcome.transport is TransportError.ATTEMPT_TIMEOUT and dispatch.timeout_s < per_attempt_s


_BY_CLASS: Final = (FailureKind.QUOTA_EXHAUSTED, FailureKind.NO_CREDENTIAL, FailureKind.CANCELLED)
"""Kinds decided by their class, never by the policy's status lists (SPEC §3)."""


def _received(outcome: Outcome) -> int | None:
    """The HTTP error status the provider answered (400–599), or None (a transport failure, a
    timeout, a broken body: their stand-in statuses are the class's, not a status received)."""
    status = outcome.status
    return status if status is not None and 400 <= status <= 599 and not outcome.error_in_body else None


def _listed(state: LoopState, outcome: Outcome, kind: FailureKind) -> bool:
    """Whether the policy's own lists name the status this failure was answered with: in
    `retry.retry_on_status`, or in `fallback.on_status` with fallback on. A list the operator
    writes means what it says, whatever class the status has (`"4xx"` included); the default
    lists name no terminal status."""
    status = _received(outcome)
    if kind in _BY_CLASS or status is None:
        return False
    policy = state.policy
    return status_matches(status, policy.retry.retry_on_status) or (
        policy.fallback.enabled and status_matches(status, policy.fallback.on_status)
    )


def _may_retry(state: LoopState, disposition: Disposition, outcome: Outcome, kind: FailureKind) -> bool:
    """Whether a failure may be re-sent to its target: a retryable class, or any status the
    policy's `retry_on_status` names (`_try_retry` checks the list), unless the provider said
    `x-should-retry: false`; a fall-back-now class when it said `true` (OpenAI's header). The
    budget, the target's retries and the deadline still bound it."""
    if outcome.should_retry is False or kind in _BY_CLASS:
        return False
    return (
        disposition is Disposition.RETRY_THEN_FALLBACK
        or (disposition is Disposition.FALLBACK_NOW and outcome.should_retry is True)
        or status_matches(_received(outcome), state.policy.retry.retry_on_status)
        or _stalled(outcome, state.policy)
    )


def _stalled(outcome: Outcome, policy: Policy) -> bool:
    """Whether a failure is a stream that sent nothing before its first-token timeout, under a
    policy that opts into re-sending those to the same target (`retry.stall_retries`)."""
    return outcome.transport is TransportError.FIRST_TOKEN_TIMEOUT and policy.retry.stall_retries > 0


def _try_retry(
    state: LoopState, entry: PlanEntry, outcome: Outcome, kind: FailureKind, now_s: float, rng: random.Random
) -> LoopState | None:
    policy = state.policy
    listed = status_matches(status_for_lists(outcome, kind, purpose="retry"), policy.retry.retry_on_status)
    stalled = _stalled(outcome, policy)
    if not listed and not stalled and outcome.should_retry is not True:  # the provider's `true` stands for the list
        return None
    if state.resend_count >= (policy.retry.stall_retries if stalled else _retry_allowance(state, entry)):
        return None
    if len(state.records) >= policy.budget.max_attempts:
        return None
    delay = retry_delay(policy.retry, state.resend_count, outcome.retry_after_s, state.deadline_s - now_s, rng)
    if delay.fall_back_now or now_s + delay.delay_s >= state.deadline_s:
        return None
    return msgspec.structs.replace(
        state,
        resend_count=state.resend_count + 1,
        wait_until_s=now_s + delay.delay_s,
        delay_s=delay.delay_s,
        delay_reason=str(delay.source),
    )


def on_skip(
    state: LoopState,
    dispatch: Dispatch,
    *,
    reason: SkipReason,
    reopen_in_s: float | None,
    now_s: float,
    detail: str = "",
    param: str | None = None,
) -> LoopState:
    """Pass over the dispatched target without an attempt (SPEC §5).

    A skipped target is not an attempt and falls through to the next one with
    no backoff. When the plan ends with no attempt made and at least one
    target out of rotation (`UNAVAILABLE_SKIPS`: OPEN, resting, slow start),
    the loop stops with `ALL_OPEN` (answer 503 + Retry-After). `detail` and
    `param`: see `SkipRecord` (UNSUPPORTED).
    """
    skip = SkipRecord(target=dispatch.entry.target, reason=reason, reopen_in_s=reopen_in_s, detail=detail, param=param)
    state = msgspec.structs.replace(state, skips=state.skips + (skip,))
    advanced = _advance(state, now_s, backoff=False)
    if advanced.stop is StopReason.EXHAUSTED and not state.records:
        if any(s.reason in UNAVAILABLE_SKIPS for s in state.skips):
            return msgspec.structs.replace(advanced, stop=StopReason.ALL_OPEN)
    return advanced


def _may_switch_to_plan_cap(state: LoopState) -> bool:
    return bool(state.plan.plan_cap) and not state.special and state.policy.fallback.enabled


def on_plan_capped(state: LoopState, dispatch: Dispatch, *, reopen_in_s: float, now_s: float) -> LoopState:
    """The dispatched target's usage cap for this request's credential is known
    not to have reset (SPEC §10 plan-cap continuity): no attempt on it.

    With a `plan_fallbacks` list (and fallback enabled), the loop moves to it
    at once; otherwise the target is skipped like any other (`PLAN_CAPPED`,
    not an attempt, never a reason for `ALL_OPEN`).
    """
    skipped = msgspec.structs.replace(
        state,
        skips=state.skips
        + (SkipRecord(target=dispatch.entry.target, reason=SkipReason.PLAN_CAPPED, reopen_in_s=reopen_in_s),),
    )
    if _may_switch_to_plan_cap(state):
        return _switch_special(skipped, state.plan.plan_cap)
    return on_skip(state, dispatch, reason=SkipReason.PLAN_CAPPED, reopen_in_s=reopen_in_s, now_s=now_s)


def on_credential_open(state: LoopState, dispatch: Dispatch, *, may_fall_back: bool, now_s: float) -> LoopState:
    """The tenant's own key for the dispatched target is known to fail (its
    credential health is OPEN, SPEC §5 "What counts").

    With credential fallback allowed (`may_fall_back`) and not yet used on
    this entry, the same target is dispatched next on the shared key (as a
    BYOK fallback, with no attempt spent on the failing key); otherwise the
    target is skipped (`CREDENTIAL_OPEN`, not an attempt).
    """
    if may_fall_back and not state.byok_fallback:
        return msgspec.structs.replace(state, byok_fallback=True)
    return on_skip(state, dispatch, reason=SkipReason.CREDENTIAL_OPEN, reopen_in_s=None, now_s=now_s)
