"""Skipped targets (SPEC §5): never an attempt, fall through at once, and a plan ended by them alone
answers 503 (out of rotation) or 502 (no credential); driven with a fake clock (`driver.py`)."""

from __future__ import annotations

import pytest
from driver import (
    ABC,
    KA,
    KB,
    KC,
    A,
    B,
    C,
    drive,
    err,
    ok,
    pol,
)

from turnout.core.loop import (
    Dispatch,
    SkipReason,
    StopReason,
)
from turnout.core.policy import Policy
from turnout.core.verdict import served_facts

# --------------------------------------------------------------------- skips (SPEC §5)


def test_loop_skipped_target_is_not_an_attempt() -> None:
    run = drive(
        ABC, Policy(), {KB: [ok()]}, skip=lambda d, now: (SkipReason.CIRCUIT_OPEN, 12.5) if d.entry is A else None
    )
    assert run.keys == [KB]
    assert run.records[0].number == 1
    assert run.records[0].is_retry is False
    assert [(s.target.key, s.reason, s.reopen_in_s) for s in run.state.skips] == [
        (KA, SkipReason.CIRCUIT_OPEN, 12.5),
    ]
    assert served_facts(run.state).attempts == 1


def test_loop_an_unsupported_target_is_passed_over_even_with_fallback_off() -> None:
    """The skip is no attempt and no failure: the next target is tried with fallback disabled,
    and a plan ending in nothing but such skips is EXHAUSTED (the verdict's 400), never ALL_OPEN."""
    unsupported = lambda d, now: (SkipReason.UNSUPPORTED, None) if d.entry is A else None
    run = drive(ABC, pol(fallback={"enabled": False}), {KB: [ok()]}, skip=unsupported)
    assert run.keys == [KB] and run.records[0].number == 1
    everything = drive(ABC, Policy(), {}, skip=lambda d, now: (SkipReason.UNSUPPORTED, None))
    assert everything.records == () and everything.give_up.reason is StopReason.EXHAUSTED
    assert everything.verdict is not None and everything.verdict.status_code == 400


@pytest.mark.parametrize("reason", [SkipReason.CIRCUIT_OPEN, SkipReason.RAMPING, SkipReason.UNSUPPORTED])
def test_loop_another_provider_reached_by_skips_alone_is_no_fallback(reason: SkipReason) -> None:
    """Skipped, not tried: the next provider of the requested model serves as the plan's
    primary would (a plan that left the target out says fallback 0 too); after a failed
    attempt it is a fallback, and so is another model after skips alone."""
    skipped_a = drive(ABC, Policy(), {KB: [ok()]}, skip=lambda d, now: (reason, 5.0) if d.entry is A else None)
    assert [(r.target.key, r.is_fallback) for r in skipped_a.records] == [(KB, False)]
    assert served_facts(skipped_a.state).fallback is False
    failed_a = drive(ABC, Policy(), {KA: [err(500)] * 10, KB: [ok()]})
    assert [(r.target.key, r.is_fallback) for r in failed_a.records][-1] == (KB, True)
    skipped_ab = drive(ABC, Policy(), {KC: [ok()]}, skip=lambda d, now: (reason, 5.0) if d.entry is not C else None)
    assert [(r.target.key, r.is_fallback) for r in skipped_ab.records] == [(KC, True)]


def test_loop_every_target_skipped_open_answers_503_with_the_shortest_cooldown() -> None:
    reopen = {KA: 12.5, KB: 3.2, KC: 30.0}
    run = drive(ABC, Policy(), {}, skip=lambda d, now: (SkipReason.CIRCUIT_OPEN, reopen[d.entry.target.key]))
    assert run.records == ()
    assert run.give_up.reason is StopReason.ALL_OPEN
    assert run.verdict is not None
    assert (run.verdict.status_code, run.verdict.error_code, run.verdict.retry_after_s) == (503, "circuit_open", 4)


def test_loop_every_target_skipped_open_over_two_cycles_is_still_all_open() -> None:
    run = drive(ABC, pol(fallback={"max_cycles": 2}), {}, skip=lambda d, now: (SkipReason.CIRCUIT_OPEN, 7.0))
    assert len(run.state.skips) == 6
    assert run.give_up.reason is StopReason.ALL_OPEN


def test_loop_every_target_without_credential_is_exhausted_502() -> None:
    run = drive(ABC, Policy(), {}, skip=lambda d, now: (SkipReason.NO_CREDENTIAL, None))
    assert run.records == ()
    assert run.give_up.reason is StopReason.EXHAUSTED
    assert run.verdict is not None
    assert (run.verdict.status_code, run.verdict.error_code) == (502, "provider_failed")


def test_loop_some_open_some_without_credential_is_all_open() -> None:
    run = drive(
        ABC,
        Policy(),
        {},
        skip=lambda d, now: (SkipReason.CIRCUIT_OPEN, 9.0) if d.entry is B else (SkipReason.NO_CREDENTIAL, None),
    )
    assert run.give_up.reason is StopReason.ALL_OPEN
    assert run.verdict is not None and run.verdict.retry_after_s == 9


def test_loop_skips_after_a_failed_attempt_end_as_exhausted_not_all_open() -> None:
    run = drive(
        ABC,
        pol(retry={"max_retries": 0}),
        {KA: [err(500)]},
        skip=lambda d, now: None if d.entry is A else (SkipReason.CIRCUIT_OPEN, 5.0),
    )
    assert run.keys == [KA]
    assert run.give_up.reason is StopReason.EXHAUSTED
    assert run.verdict is not None and run.verdict.status_code == 502


def test_loop_skipping_a_scheduled_retry_moves_to_the_next_target() -> None:
    opened: set[str] = set()

    def skip(d: Dispatch, now: float) -> tuple[SkipReason, float | None] | None:
        if d.is_retry:
            opened.add(d.entry.target.key)
        return (SkipReason.CIRCUIT_OPEN, 30.0) if d.entry.target.key in opened else None

    run = drive(ABC, Policy(), {KA: [err(503)], KB: [ok()]}, skip=skip)
    assert run.keys == [KA, KB]
    assert run.records[1].is_retry is False and run.records[1].resend_count == 0
