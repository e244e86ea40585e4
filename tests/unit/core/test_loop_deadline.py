"""The loop and the clock (SPEC §3, §4): the deadline bounds every attempt, retry and wait, and the
fallback backoff; driven with a fake clock (`driver.py`)."""

from __future__ import annotations

import pytest
from driver import (
    ABC,
    KA,
    KB,
    KC,
    A,
    MaxRandom,
    drive,
    err,
    ok,
    pol,
)

from turnout.core.loop import (
    Dispatch,
    GiveUp,
    SkipReason,
    StopReason,
    begin,
    next_step,
)
from turnout.core.policy import Policy
from turnout.core.types import FailureKind

# --------------------------------------------------------------------- deadline


def test_loop_first_dispatch_timeout_is_the_smaller_of_attempt_timeout_and_time_left() -> None:
    policy = pol(retry={"per_attempt_timeout_ms": 2000})
    state = begin(ABC, policy, deadline_s=100.0)
    step = next_step(state, 0.0)
    assert isinstance(step, Dispatch) and step.timeout_s == 2.0
    step = next_step(state, 99.5)
    assert isinstance(step, Dispatch) and step.timeout_s == pytest.approx(0.5)


@pytest.mark.parametrize("at_s", [10.0, 10.5], ids=["at-deadline", "after-deadline"])
def test_loop_nothing_starts_at_or_after_the_deadline(at_s: float) -> None:
    state = begin(ABC, Policy(), deadline_s=10.0)
    assert next_step(state, at_s) == GiveUp(reason=StopReason.DEADLINE)


@pytest.mark.parametrize(
    ("attempt_s", "expected"),
    [(9.9, [KA, KB]), (9.75, [KA, KB]), (9.7, [KA, KA])],
    ids=["retry-would-start-after", "retry-would-start-exactly-at", "retry-fits"],
)
def test_loop_retry_starting_at_or_after_the_deadline_is_not_scheduled(attempt_s: float, expected: list[str]) -> None:
    # Full jitter at its top: the first retry waits base_ms = 0.25 s.
    run = drive(
        ABC,
        Policy(),
        {KA: [err(503), ok()], KB: [ok()]},
        deadline_s=10.0,
        rng=MaxRandom(),
        duration_s=lambda d: attempt_s if d.number == 1 else 0.01,
    )
    assert run.keys == expected
    assert all(t + w.delay_s < 10.0 for t, w in run.waits)


@pytest.mark.parametrize(
    ("hint_s", "expected"),
    [(1.0, [KA, KB]), (1.5, [KA, KB]), (0.99, [KA, KA])],
    ids=["hint-equals-time-left", "hint-beyond-deadline", "hint-fits"],
)
def test_loop_retry_after_reaching_the_deadline_falls_back(hint_s: float, expected: list[str]) -> None:
    run = drive(
        ABC,
        Policy(),
        {KA: [err(429, retry_after_s=hint_s), ok()], KB: [ok()]},
        deadline_s=10.0,
        duration_s=lambda d: 9.0 if d.number == 1 else 0.001,
    )
    assert run.keys == expected


def test_loop_deadline_during_an_attempt_gives_504_budget_exhausted() -> None:
    run = drive(ABC, Policy(), {KA: [ok()]}, deadline_s=5.0, duration_s=6.0)
    assert run.keys == [KA]
    assert run.records[0].kind is FailureKind.TIMEOUT
    assert run.now_s == 5.0
    assert run.give_up.reason is StopReason.DEADLINE
    assert run.verdict is not None
    assert (run.verdict.status_code, run.verdict.error_code) == (504, "budget_exhausted")
    assert len(run.verdict.summary) == 1


def test_loop_deadline_after_several_attempts_reports_them_all() -> None:
    run = drive(
        ABC, pol(retry={"max_retries": 0}), {KA: [err(503)], KB: [err(503)], KC: [ok()]}, deadline_s=5.0, duration_s=2.5
    )
    assert run.keys == [KA, KB]
    assert run.give_up.reason is StopReason.DEADLINE
    assert run.verdict is not None and run.verdict.status_code == 504
    assert [row.attempt for row in run.verdict.summary] == [1, 2]


# --------------------------------------------------------------------- fallback backoff


def test_loop_fallback_backoff_waits_before_the_next_target() -> None:
    run = drive(
        ABC, pol(retry={"max_retries": 0}, fallback={"backoff_ms": 500}), {KA: [err(500)], KB: [ok()]}, duration_s=0.1
    )
    assert [(t, w.delay_s, w.reason) for t, w in run.waits] == [(0.1, 0.5, "fallback_backoff")]
    assert run.records[1].started_s == pytest.approx(0.6)
    assert (run.records[1].delay_before_s, run.records[1].delay_reason) == (0.5, "fallback_backoff")


def test_loop_fallback_backoff_past_the_deadline_stops_with_deadline() -> None:
    run = drive(
        ABC,
        pol(retry={"max_retries": 0}, fallback={"backoff_ms": 2000}),
        {KA: [err(500)]},
        deadline_s=2.0,
        duration_s=0.5,
    )
    assert run.keys == [KA]
    assert run.waits == []
    assert run.give_up.reason is StopReason.DEADLINE


def test_loop_no_fallback_backoff_after_a_skip() -> None:
    run = drive(
        ABC,
        pol(fallback={"backoff_ms": 500}),
        {KB: [ok()]},
        skip=lambda d, now: (SkipReason.CIRCUIT_OPEN, 5.0) if d.entry is A else None,
    )
    assert run.waits == []
    assert run.keys == [KB]
