"""Admission: whether one dispatched attempt may go, decided from its gates (SPEC §5, §6, §10).

Owns: the order and meaning of the gates a dispatched attempt passes before it is sent, and
what the loop does when one of them is closed. In order:

1. a provider and credential to call the target with (closed: `NO_CREDENTIAL`);
2. an API that can express the request (closed: `UNSUPPORTED`, with what it cannot express);
3. the tenant's own key not failing (closed: `CREDENTIAL_OPEN`: the shared key next, or a skip);
4. the account's usage cap reset (closed: `PLAN_CAPPED`: the `plan_fallbacks`, or a skip);
5. the target's breaker: OPEN or a probe in flight elsewhere, the slow-start share, the
   provider's "not before" (closed: `CIRCUIT_OPEN`, `RAMPING`, `RESTING`).

The shell (`turnout.router.attempt`) reads the gates' facts (`Gates`) and asks `admission` for
the one decision. Reading the breaker has side effects (it takes the HALF_OPEN probe permit and a
slow-start share), so the shell reads it only when `admission` answers `ask_breaker` (every gate
before it open), then asks again with its answer. `Admission.go` sends the attempt; a refusal
is handed to `on_refused`, which changes the loop as the closed gate says, with no attempt made.
Must not import: anything outside the standard library, msgspec and `turnout.core`.
"""

from __future__ import annotations

import msgspec

from turnout.core.loop import LoopState, on_credential_open, on_plan_capped, on_skip
from turnout.core.steps import Dispatch, SkipReason

BREAKER_REASONS = frozenset({SkipReason.CIRCUIT_OPEN, SkipReason.RAMPING, SkipReason.RESTING})
"""The reasons the breaker's gate (5) closes with."""


class Unsupported(msgspec.Struct, frozen=True):
    """What the target's API cannot express of the request (gate 2).

    Attributes:
        detail: the field and why, for the client's error (`SkipRecord.detail`).
        param: the request field it names, or None.
    """

    detail: str
    param: str | None = None


class BreakerAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """The breaker's answer for the target (gate 5).

    Attributes:
        refused: why it may not be attempted now (one of `BREAKER_REASONS`), None: admitted.
        reopen_in_s: for a refusal, seconds until it may admit again, or None.
    """

    refused: SkipReason | None = None
    reopen_in_s: float | None = None


class Gates(msgspec.Struct, frozen=True, kw_only=True):
    """The facts the shell read of one dispatch's gates (module doc, in order).

    Attributes:
        resolved: a provider and credential exist for the target (gate 1).
        unsupported: what the target's API cannot express, or None (gate 2).
        credential_open: the tenant's own key for the target is failing (gate 3).
        may_fall_back: the shared key may stand in for the tenant's own (SPEC §6).
        capped_s: seconds until the account's usage cap on the target resets, or None
            (gate 4; the shell reads it only for a plan with `plan_fallbacks`).
        breaker: the breaker's answer (gate 5), or None while it has not been asked.
    """

    resolved: bool = True
    unsupported: Unsupported | None = None
    credential_open: bool = False
    may_fall_back: bool = False
    capped_s: float | None = None
    breaker: BreakerAnswer | None = None


class Admission(msgspec.Struct, frozen=True, kw_only=True):
    """The gates' one decision for a dispatch.

    Attributes:
        refused: the first closed gate's reason, or None.
        ask_breaker: every gate before the breaker's is open and it has not been asked.
        reopen_in_s: for a refusal, seconds until the target may be attempted again, or None.
        detail / param: for `UNSUPPORTED`, as in `Unsupported`.
        may_fall_back: for `CREDENTIAL_OPEN`, the shared key may be tried on the target instead.
    """

    refused: SkipReason | None = None
    ask_breaker: bool = False
    reopen_in_s: float | None = None
    detail: str = ""
    param: str | None = None
    may_fall_back: bool = False

    @property
    def go(self) -> bool:
        """Every gate is open: send the attempt."""
        return self.refused is None and not self.ask_breaker


def admission(state: LoopState, gates: Gates) -> Admission:
    """The decision for the dispatch `gates` were read for: the first closed gate refuses.

    A usage cap closes gate 4 only on the plan's main sequence (a special list, the
    `plan_fallbacks` included, is walked as it is: SPEC §10).
    """
    if not gates.resolved:
        return Admission(refused=SkipReason.NO_CREDENTIAL)
    if gates.unsupported is not None:
        return Admission(refused=SkipReason.UNSUPPORTED, detail=gates.unsupported.detail, param=gates.unsupported.param)
    if gates.credential_open:
        return Admission(refused=SkipReason.CREDENTIAL_OPEN, may_fall_back=gates.may_fall_back)
    if gates.capped_s is not None and not state.special:
        return Admission(refused=SkipReason.PLAN_CAPPED, reopen_in_s=gates.capped_s)
    if gates.breaker is None:
        return Admission(ask_breaker=True)
    if gates.breaker.refused is not None:
        return Admission(refused=gates.breaker.refused, reopen_in_s=gates.breaker.reopen_in_s)
    return Admission()


def on_refused(state: LoopState, dispatch: Dispatch, refusal: Admission, *, now_s: float) -> LoopState:
    """The loop after `refusal` kept `dispatch` from going (no attempt made, SPEC §5).

    `CREDENTIAL_OPEN` gives the same target on the shared key when it may
    (`turnout.core.loop.on_credential_open`), `PLAN_CAPPED` the plan's `plan_fallbacks`
    (`on_plan_capped`); every other reason passes over the target (`on_skip`).

    Raises:
        ValueError: `refusal` refuses nothing (`refusal.refused` is None).
    """
    reason = refusal.refused
    if reason is None:
        raise ValueError("on_refused needs a refusal: this admission lets the attempt go")
    if reason is SkipReason.CREDENTIAL_OPEN:
        return on_credential_open(state, dispatch, may_fall_back=refusal.may_fall_back, now_s=now_s)
    if reason is SkipReason.PLAN_CAPPED and refusal.reopen_in_s is not None:
        return on_plan_capped(state, dispatch, reopen_in_s=refusal.reopen_in_s, now_s=now_s)
    return on_skip(
        state,
        dispatch,
        reason=reason,
        reopen_in_s=refusal.reopen_in_s,
        now_s=now_s,
        detail=refusal.detail,
        param=refusal.param,
    )
