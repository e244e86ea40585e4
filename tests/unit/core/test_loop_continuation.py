"""A broken stream's continuation as the core's loop (`begin_continuation`, SPEC §8): each candidate
once, numbered on, any failure passing to the next at once; driven with a fake clock (`driver.py`)."""

from __future__ import annotations

import random

import pytest
from driver import ABC, KA, KB, KC, drive, err, ok, pol, quota, transport

from turnout.core.loop import (
    CONTINUATION,
    Dispatch,
    GiveUp,
    StopReason,
    begin_continuation,
    next_step,
    on_credential_open,
    on_outcome,
)
from turnout.core.plan import Role
from turnout.core.types import FailureKind, Outcome

TARGETS = [e.target for e in ABC.entries]


@pytest.mark.parametrize(
    "failure",
    [err(400, "prefill rejected"), err(503), err(429), transport(), quota(), err(401)],
    ids=["400", "503", "429", "reset", "quota", "401"],
)
def test_any_failure_passes_to_the_next_candidate_at_once(failure: Outcome) -> None:
    policy = pol()
    state = begin_continuation(ABC, TARGETS, policy, first_number=4)
    run = drive(ABC, policy, {KA: [failure], KB: [ok()]}, begun=state)
    assert run.keys == [KA, KB]
    assert run.give_up.reason is StopReason.SERVED
    assert [r.number for r in run.records] == [4, 5]
    assert not run.waits  # no retry, no backoff


def test_every_candidate_is_tried_once_whatever_the_budget() -> None:
    policy = pol(budget={"max_attempts": 1})
    state = begin_continuation(ABC, TARGETS, policy, first_number=9)
    run = drive(ABC, policy, {KA: [err(503)], KB: [err(503)], KC: [err(503)]}, begun=state)
    assert run.keys == [KA, KB, KC]
    assert run.give_up.reason is StopReason.EXHAUSTED  # one pass, never a second cycle
    assert [r.number for r in run.records] == [9, 10, 11]


def test_a_continuation_dispatch_is_a_provider_fallback_with_the_per_attempt_timeout() -> None:
    state = begin_continuation(ABC, TARGETS, pol(retry={"per_attempt_timeout_ms": 7000}), first_number=2)
    step = next_step(state, 1e9)
    assert isinstance(step, Dispatch)
    assert (step.number, step.timeout_s, step.delay_reason, step.entry.role) == (
        2,
        7.0,
        CONTINUATION,
        Role.PROVIDER_FALLBACK,
    )
    assert state.plan.key_mode == ABC.key_mode


def test_a_rejected_tenant_key_is_not_retried_on_the_shared_key() -> None:
    state = begin_continuation(ABC, TARGETS, pol(), first_number=2)
    step = next_step(state, 0.0)
    assert isinstance(step, Dispatch)
    after = on_outcome(state, step, err(401), started_s=0.0, now_s=0.1, rng=random.Random(1), credential_fallback=True)
    assert not after.byok_fallback and after.cursor == 1
    assert after.records[-1].considered == ()
    skipped = on_credential_open(state, step, may_fall_back=True, now_s=0.1)
    assert not skipped.byok_fallback and skipped.cursor == 1


def test_a_cancelled_continuation_stops() -> None:
    state = begin_continuation(ABC, TARGETS, pol(), first_number=2)
    step = next_step(state, 0.0)
    assert isinstance(step, Dispatch)
    after = on_outcome(
        state,
        step,
        Outcome(message="gone"),
        started_s=0.0,
        now_s=0.1,
        rng=random.Random(1),
        kind=FailureKind.CANCELLED,
    )
    assert next_step(after, 0.2) == GiveUp(reason=StopReason.CANCELLED)
