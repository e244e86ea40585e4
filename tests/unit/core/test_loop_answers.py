"""What a finished loop answers and records (SPEC §7, §9): its verdict, its attempt records, and
states never mutated; driven with a fake clock (`driver.py`)."""

from __future__ import annotations

import random

import msgspec
import pytest
from driver import (
    ABC,
    KA,
    KB,
    KC,
    MaxRandom,
    Run,
    drive,
    err,
    ok,
    plan_of,
    pol,
)

from turnout.core.loop import (
    Dispatch,
    GiveUp,
    SkipReason,
    StopReason,
    Wait,
    begin,
    next_step,
    on_outcome,
    on_skip,
)
from turnout.core.plan import Role, RoutingSettings, build_plan
from turnout.core.policy import Policy
from turnout.core.types import Disposition, FailureKind, Outcome, Target
from turnout.core.verdict import conclude

# --------------------------------------------------------------------- verdict of a loop


def test_loop_every_failure_a_rate_limit_answers_429_with_the_shortest_hint() -> None:
    run = drive(
        ABC,
        Policy(),
        {
            KA: [err(429, retry_after_s=5.0), err(429, retry_after_s=3.0)],
            KB: [err(429, retry_after_s=7.0)],
            KC: [err(429)],
        },
    )
    assert run.keys == [KA, KA, KB, KC]
    assert run.give_up.reason is StopReason.EXHAUSTED
    assert run.verdict is not None
    assert (run.verdict.status_code, run.verdict.retry_after_s) == (429, 3)


def test_loop_rate_limits_mixed_with_other_failures_answer_502() -> None:
    run = drive(ABC, Policy(), {KA: [err(429), err(429)], KB: [err(503)], KC: [err(429)]})
    assert run.verdict is not None
    assert (run.verdict.status_code, run.verdict.error_code) == (502, "provider_failed")


def test_loop_reroute_exhausted_answers_502_and_never_calls_the_requested_model() -> None:
    catalog = {
        "gpt-5": (Target(provider="openai", model="gpt-5", catalog_model="gpt-5"),),
        "claude": (Target(provider="anthropic", model="claude", catalog_model="claude"),),
    }
    p = build_plan(
        "gpt-5",
        catalog=catalog,
        providers=frozenset({"openai", "anthropic"}),
        settings=RoutingSettings(reroutes=("claude",)),
        policy=Policy(),
        health={},
        rng=random.Random(0),
    )
    run = drive(p, Policy(), {"anthropic/claude": [err(503), err(500)]})
    assert run.keys == ["anthropic/claude", "anthropic/claude"]
    assert run.give_up.reason is StopReason.EXHAUSTED
    assert run.verdict is not None
    assert (run.verdict.status_code, run.verdict.error_code) == (502, "provider_failed")
    assert run.verdict.served.reroute is True
    assert all(r.is_reroute for r in run.records)


def test_loop_empty_plan_gives_up_at_once() -> None:
    state = begin(plan_of(requested_model="gpt-5"), Policy(), deadline_s=10.0)
    assert next_step(state, 0.0) == GiveUp(reason=StopReason.EXHAUSTED)


def test_loop_cancelled_attempt_stops_the_loop() -> None:
    state = begin(ABC, Policy(), deadline_s=10.0)
    step = next_step(state, 0.0)
    assert isinstance(step, Dispatch)
    state = on_outcome(
        state, step, Outcome(), started_s=0.0, now_s=0.2, rng=random.Random(0), kind=FailureKind.CANCELLED
    )
    assert next_step(state, 0.2) == GiveUp(reason=StopReason.CANCELLED)
    assert conclude(state, StopReason.CANCELLED).status_code == 499


def test_loop_states_are_never_mutated() -> None:
    state = begin(ABC, Policy(), deadline_s=10.0)
    before = msgspec.structs.asdict(state)
    step = next_step(state, 0.0)
    assert isinstance(step, Dispatch)
    on_outcome(state, step, err(503), started_s=0.0, now_s=0.1, rng=random.Random(0))
    on_skip(state, step, reason=SkipReason.CIRCUIT_OPEN, reopen_in_s=1.0, now_s=0.0)
    assert msgspec.structs.asdict(state) == before


# --------------------------------------------------------------------- attempt records


def test_loop_attempt_records_carry_the_decision_facts() -> None:
    policy = pol(retry={"max_retries": 1}, fallback={"backoff_ms": 100})
    run: Run = drive(
        ABC,
        policy,
        {KA: [err(503, "overloaded", code="server_busy"), err(429, "slow down", retry_after_s=0.3)], KB: [ok()]},
        duration_s=0.2,
        rng=MaxRandom(),
    )
    r1, r2, r3 = run.records
    assert [r.number for r in run.records] == [1, 2, 3]

    assert (r1.target.key, r1.role, r1.is_retry, r1.is_fallback, r1.is_reroute, r1.resend_count, r1.cycle) == (
        KA,
        Role.PRIMARY,
        False,
        False,
        False,
        0,
        1,
    )
    assert (r1.kind, r1.disposition, r1.status, r1.error_code, r1.message) == (
        FailureKind.SERVER_ERROR,
        Disposition.RETRY_THEN_FALLBACK,
        503,
        "server_busy",
        "overloaded",
    )
    assert (r1.delay_before_s, r1.delay_reason, r1.started_s) == (0.0, None, 0.0)
    assert r1.duration_ms == pytest.approx(200.0)

    assert (r2.target.key, r2.is_retry, r2.is_fallback, r2.resend_count) == (KA, True, False, 1)
    assert (r2.delay_before_s, r2.delay_reason) == (0.25, "backoff")
    assert r2.started_s == pytest.approx(0.45)
    assert (r2.kind, r2.retry_after_s) == (FailureKind.RATE_LIMITED, 0.3)

    assert (r3.target.key, r3.role, r3.is_retry, r3.is_fallback, r3.resend_count) == (
        KB,
        Role.PROVIDER_FALLBACK,
        False,
        True,
        0,
    )
    assert (r3.delay_before_s, r3.delay_reason) == (0.1, "fallback_backoff")
    assert r3.started_s == pytest.approx(0.75)
    assert (r3.kind, r3.disposition, r3.message) == (FailureKind.SUCCESS, Disposition.SUCCESS, "")


def test_loop_dispatch_numbers_and_waits_line_up_with_records() -> None:
    run = drive(ABC, Policy(), {KA: [err(503), err(503)], KB: [err(502)], KC: [ok()]}, rng=random.Random(5))
    dispatches = [s for _, s in run.steps if isinstance(s, Dispatch)]
    assert [d.number for d in dispatches] == [1, 2, 3, 4]
    assert [d.is_retry for d in dispatches] == [False, True, False, False]
    assert all(isinstance(s, Wait) and s.reason == "backoff" for _, s in run.waits)
    assert len(run.waits) <= 1  # a jitter of exactly 0 needs no wait
