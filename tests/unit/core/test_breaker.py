"""Table tests and properties for turnout.core.breaker (SPEC §5 health over time).

Pure and synchronous: time is a float passed in, no store, no clock;
randomness (failure sequences) is a seeded `random.Random`.
"""

from __future__ import annotations

import math
import random

import msgspec
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from turnout.core.breaker import (
    CLOSED,
    NOT_BEFORE_SLACK_S,
    Admission,
    BreakerSettings,
    BreakerSnapshot,
    BreakerState,
    Counted,
    TripRule,
    admit,
    cooldown_for,
    counts,
    pace,
    ramp_share,
    record,
    reopen_in_s,
    rest,
    resting_for_s,
    run_needed,
    score,
    state_at,
    trip_rule,
    unavailable_for_s,
)

DEFAULTS = BreakerSettings()
S, F, N = Counted.SUCCESS, Counted.FAILURE, Counted.NEUTRAL


def feed(
    results: list[Counted],
    *,
    start: BreakerSnapshot = CLOSED,
    t0: float = 1000.0,
    step_s: float = 0.1,
    settings: BreakerSettings = DEFAULTS,
    sole: bool = False,
) -> BreakerSnapshot:
    """Apply `results` one `step_s` apart as non-probe attempts."""
    snap = start
    for i, counted in enumerate(results):
        snap = record(snap, counted, probe=False, now_s=t0 + i * step_s, settings=settings, sole=sole, error="e")
    return snap


# ------------------------------------------------------------ defaults (the figures)


def test_defaults_bring_a_healed_provider_back_within_30_s() -> None:
    """The worst case: the probe fails just before healing and the next one
    waits the longest cooldown; the default cap keeps that under 30 s."""
    assert cooldown_for(10**6, DEFAULTS) <= 20.0
    assert DEFAULTS.max_cooldown_s + 4.0 < 30.0  # plus one request interval of the 4 s


@pytest.mark.parametrize("history", [0, 10, 50, 500])
def test_a_healthy_target_that_goes_hard_down_opens_within_about_3_calls(history: int) -> None:
    snap = feed([S] * history)
    t = 1000.0 + history * 0.1
    opened_after = None
    for i in range(1, 10):
        snap = record(snap, F, probe=False, now_s=t + i * 0.1, settings=DEFAULTS, error="down")
        if snap.open:
            opened_after = i
            break
    assert opened_after is not None
    assert opened_after <= (5 if history < 10 else 3)


@pytest.mark.parametrize("history", [0, 50])
def test_a_sole_target_hard_down_still_opens_within_20_calls(history: int) -> None:
    snap = feed([S] * history, sole=True)
    for i in range(1, 21):
        snap = record(snap, F, probe=False, now_s=1010.0 + i * 0.1, settings=DEFAULTS, sole=True)
        if snap.open:
            break
    assert snap.open


@pytest.mark.parametrize("sole", [False, True])
@pytest.mark.parametrize("seed", range(20))
def test_ten_percent_random_errors_never_open_the_breaker(seed: int, sole: bool) -> None:
    """2,000 calls at 10 req/s with 10 % random failures, 20 seeds: no trip."""
    rng = random.Random(seed)
    results = [F if rng.random() < 0.10 else S for _ in range(2000)]
    snap = CLOSED
    for i, counted in enumerate(results):
        snap = record(snap, counted, probe=False, now_s=1000.0 + i * 0.1, settings=DEFAULTS, sole=sole)
        assert not snap.open, f"opened after {i + 1} calls"


@pytest.mark.parametrize("seed", range(20))
def test_fifty_percent_random_errors_never_open_a_sole_target(seed: int) -> None:
    rng = random.Random(seed)
    snap = CLOSED
    for i in range(2000):
        counted = F if rng.random() < 0.5 else S
        snap = record(snap, counted, probe=False, now_s=1000.0 + i * 0.1, settings=DEFAULTS, sole=True)
        assert not snap.open, f"opened after {i + 1} calls"


def test_fifty_percent_random_errors_open_a_target_with_alternatives_by_the_rate_rule() -> None:
    rng = random.Random(7)
    snap = CLOSED
    for i in range(400):
        snap = record(snap, F if rng.random() < 0.5 else S, probe=False, now_s=1000.0 + i * 0.1, settings=DEFAULTS)
        if snap.open:
            break
    assert snap.open


# ------------------------------------------------------------ the run rule


@pytest.mark.parametrize(
    ("successes", "failures", "sole", "needed"),
    [
        (0.0, 0.0, False, 5),  # no history: p = 0.1 / 2 = 0.05
        (10.0, 0.0, False, 3),  # p = 0.1 / 12
        (1000.0, 0.0, False, 3),  # floor
        (90.0, 10.0, False, 6),  # ~10 %
        (50.0, 50.0, False, 20),  # ~50 %
        (1000.0, 0.0, True, 20),  # sole floor
        (90.0, 10.0, True, 20),
    ],
)
def test_run_needed_follows_the_baseline_failure_rate(
    successes: float, failures: float, sole: bool, needed: int
) -> None:
    snap = BreakerSnapshot(successes=successes, failures=failures, counted_at_s=1000.0)
    assert run_needed(snap, 1000.0, DEFAULTS, sole=sole) == needed


def test_run_needed_is_at_least_the_configured_floor() -> None:
    cfg = BreakerSettings(consecutive_failures=7)
    assert run_needed(BreakerSnapshot(successes=10**6, counted_at_s=0.0), 0.0, cfg, sole=False) == 7


def test_a_success_ends_the_run_and_keeps_its_failures() -> None:
    snap = feed([F, F], t0=0.0, step_s=0.0)
    assert snap.run == 2 and snap.run_weight == pytest.approx(2.0)
    snap = feed([S], start=snap, t0=0.0)
    assert snap.run == 0 and snap.run_weight == 0.0
    assert snap.failures == pytest.approx(2.0) and snap.successes == pytest.approx(1.0)


def test_neutral_results_change_nothing() -> None:
    snap = feed([F, F])
    assert record(snap, N, probe=False, now_s=5000.0, settings=DEFAULTS) is snap
    assert record(snap, N, probe=True, now_s=5000.0, settings=DEFAULTS) is snap


# ------------------------------------------------------------ the rate rule


@pytest.mark.parametrize(
    ("cfg", "successes", "failures", "run", "sole", "rule"),
    [
        # share = failures (the run included) / (2 + calls): 6 / 12 = 0.5
        (BreakerSettings(consecutive_failures=99, sole_consecutive_failures=99), 4.0, 6.0, 1, False, TripRule.RATE),
        (BreakerSettings(consecutive_failures=99, sole_consecutive_failures=99), 5.0, 5.0, 1, False, None),
        (BreakerSettings(consecutive_failures=99, sole_consecutive_failures=99), 4.0, 6.0, 1, True, None),
        (BreakerSettings(consecutive_failures=99, sole_consecutive_failures=99), 0.0, 18.0, 1, True, TripRule.RATE),
        (BreakerSettings(consecutive_failures=99, sole_consecutive_failures=99), 0.0, 17.0, 1, True, None),
        (BreakerSettings(consecutive_failures=99, min_results=20), 4.0, 5.0, 1, False, None),  # 10 < 20 calls
        (BreakerSettings(consecutive_failures=99, failure_rate=1.5), 0.0, 20.0, 1, False, None),  # disabled
        (DEFAULTS, 100.0, 0.0, 1, False, None),
    ],
)
def test_trip_rule_table(
    cfg: BreakerSettings, successes: float, failures: float, run: int, sole: bool, rule: TripRule | None
) -> None:
    snap = BreakerSnapshot(successes=successes, failures=failures, run=run, run_weight=run, counted_at_s=50.0)
    assert trip_rule(snap, 50.0, cfg, sole=sole) == rule


# ------------------------------------------------------------ open, half-open, probe, cooldown


def _tripped(at: float = 100.0) -> BreakerSnapshot:
    snap = feed([F] * 5, t0=at - 0.5)
    assert snap.open
    return snap


def test_open_rejects_until_the_cooldown_then_asks_for_a_probe() -> None:
    snap = _tripped()
    assert snap.cooldown_s == DEFAULTS.cooldown_s
    opened = snap.opened_at_s
    assert admit(snap, opened + 1, DEFAULTS) is Admission.REJECT
    assert reopen_in_s(snap, opened + 1) == pytest.approx(DEFAULTS.cooldown_s - 1)
    assert state_at(snap, opened + DEFAULTS.cooldown_s) is BreakerState.HALF_OPEN
    assert admit(snap, opened + DEFAULTS.cooldown_s, DEFAULTS) is Admission.PROBE


@pytest.mark.parametrize(("trips", "expected"), [(1, 5.0), (2, 10.0), (3, 20.0), (4, 20.0), (60, 20.0)])
def test_cooldown_doubles_per_trip_and_is_capped(trips: int, expected: float) -> None:
    assert cooldown_for(trips, DEFAULTS) == expected


def test_a_failed_probe_reopens_with_a_longer_cooldown() -> None:
    snap = _tripped()
    later = snap.opened_at_s + snap.cooldown_s + 1
    reopened = record(snap, F, probe=True, now_s=later, settings=DEFAULTS, error="still down")
    assert reopened.open and reopened.trips == 2 and reopened.cooldown_s == 10.0
    assert reopened.opened_at_s == later and reopened.trip_rule == TripRule.PROBE
    assert reopened.last_error == "still down"


def test_a_late_result_while_open_only_enters_the_counts() -> None:
    snap = _tripped()
    after = record(snap, S, probe=False, now_s=snap.opened_at_s + 1, settings=DEFAULTS)
    assert after.open and after.opened_at_s == snap.opened_at_s and after.trips == snap.trips


def test_a_successful_probe_closes_clears_the_outage_and_starts_slow_start() -> None:
    snap = _tripped()
    at = snap.opened_at_s + snap.cooldown_s + 2
    closed = record(snap, S, probe=True, now_s=at, settings=DEFAULTS)
    assert not closed.open and closed.trips == 0 and closed.run == 0 and closed.failures == 0.0
    assert closed.closed_at_s == at
    assert score(closed, at, DEFAULTS) == 1.0
    assert ramp_share(closed, at, DEFAULTS) == pytest.approx(DEFAULTS.slow_start_min_share)
    assert ramp_share(closed, at + DEFAULTS.slow_start_s / 2, DEFAULTS) == pytest.approx(0.55)
    assert ramp_share(closed, at + DEFAULTS.slow_start_s, DEFAULTS) == 1.0


@pytest.mark.parametrize(
    ("draw", "expected"),
    [(0.0, Admission.ADMIT), (0.099, Admission.ADMIT), (0.1, Admission.RAMP), (0.99, Admission.RAMP)],
)
def test_slow_start_admits_the_share_of_draws_below_it(draw: float, expected: Admission) -> None:
    closed = BreakerSnapshot(closed_at_s=100.0, successes=1.0, counted_at_s=100.0)
    assert admit(closed, 100.0, DEFAULTS, draw) is expected


# ------------------------------------------------------------ not before (Retry-After)


def test_rest_holds_every_state_until_the_hint_and_is_capped() -> None:
    snap = rest(CLOSED, 3600.0, 100.0, DEFAULTS)
    assert snap.not_before_s == 100.0 + DEFAULTS.max_not_before_s
    assert admit(snap, 160.0, DEFAULTS) is Admission.REST
    assert resting_for_s(snap, 160.0) == pytest.approx(snap.not_before_s - NOT_BEFORE_SLACK_S - 160.0)
    assert admit(snap, snap.not_before_s, DEFAULTS) is Admission.ADMIT
    assert rest(snap, 1.0, 101.0, DEFAULTS) is snap  # an earlier hint never shortens a later one


def test_unavailable_for_covers_open_and_resting_but_not_half_open() -> None:
    snap = _tripped()
    assert unavailable_for_s(snap, snap.opened_at_s) == pytest.approx(snap.cooldown_s)
    assert unavailable_for_s(snap, snap.opened_at_s + snap.cooldown_s) == 0.0
    assert unavailable_for_s(rest(CLOSED, 10.0, 0.0, DEFAULTS), 0.0) == pytest.approx(10.0 - NOT_BEFORE_SLACK_S)


# ------------------------------------------------------------ properties

times = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)
results = st.lists(st.sampled_from([S, F, N]), max_size=60)
gaps = st.floats(min_value=0.0, max_value=30.0, allow_nan=False)


@hsettings(max_examples=300, deadline=None)
@given(results=results, gap=gaps, later=st.floats(min_value=0.0, max_value=1e4, allow_nan=False))
def test_property_score_never_falls_while_no_result_arrives(results: list[Counted], gap: float, later: float) -> None:
    snap = feed(results, step_s=gap)
    t = 1000.0 + len(results) * gap
    assert score(snap, t + later, DEFAULTS) >= score(snap, t, DEFAULTS) - 1e-12


@hsettings(max_examples=300, deadline=None)
@given(results=results, gap=gaps)
def test_property_no_failure_in_the_history_scores_exactly_one(results: list[Counted], gap: float) -> None:
    clean = [r for r in results if r is not F]
    snap = feed(clean, step_s=gap)
    assert score(snap, 1000.0 + len(clean) * gap, DEFAULTS) == 1.0


@hsettings(max_examples=300, deadline=None)
@given(results=results, gap=gaps, extra=st.integers(min_value=1, max_value=5))
def test_property_a_failure_never_raises_the_score(results: list[Counted], gap: float, extra: int) -> None:
    snap = feed(results, step_s=gap)
    t = 1000.0 + len(results) * gap
    worse = feed([F] * extra, start=snap, t0=t, step_s=0.0)
    assert score(worse, t, DEFAULTS) <= score(snap, t, DEFAULTS) + 1e-12


@hsettings(max_examples=300, deadline=None)
@given(results=results, gap=gaps, sole=st.booleans())
def test_property_invariants_of_any_sequence(results: list[Counted], gap: float, sole: bool) -> None:
    snap = CLOSED
    for i, counted in enumerate(results):
        now = 1000.0 + i * gap
        before = snap
        snap = record(snap, counted, probe=False, now_s=now, settings=DEFAULTS, sole=sole)
        s, f = counts(snap, now, DEFAULTS)
        assert s >= 0 and f >= 0 and snap.run >= 0
        assert 0.0 < score(snap, now, DEFAULTS) <= 1.0
        assert snap.cooldown_s <= DEFAULTS.max_cooldown_s
        if counted is S:
            assert snap.run == 0 or snap.open
        if not before.open and snap.open:  # a trip happens only on a failure, and a rule says so
            assert counted is F and snap.trip_rule in {TripRule.RUN, TripRule.RATE}
        if not counted is F:
            assert snap.open == before.open  # only failures (and probes) move the state


@hsettings(max_examples=200, deadline=None)
@given(trips=st.integers(min_value=0, max_value=10**6))
def test_property_cooldown_is_monotonic_and_capped(trips: int) -> None:
    assert cooldown_for(trips, DEFAULTS) <= cooldown_for(trips + 1, DEFAULTS) <= DEFAULTS.max_cooldown_s


@hsettings(max_examples=200, deadline=None)
@given(now=times, hint=st.floats(min_value=0.0, max_value=1e6, allow_nan=False))
def test_property_rest_never_exceeds_the_ceiling(now: float, hint: float) -> None:
    snap = rest(CLOSED, hint, now, DEFAULTS)
    assert snap.not_before_s <= now + DEFAULTS.max_not_before_s + 1e-6


def test_snapshots_round_trip_through_msgpack() -> None:
    snap = msgspec.structs.replace(_tripped(), not_before_s=123.5, last_error="x")
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(snap), type=BreakerSnapshot) == snap


def test_half_life_is_a_quarter_of_the_window() -> None:
    snap = BreakerSnapshot(failures=16.0, counted_at_s=0.0)
    assert counts(snap, DEFAULTS.window, DEFAULTS)[1] == pytest.approx(1.0)
    assert math.isclose(DEFAULTS.half_life_s, DEFAULTS.window / 4)


@hsettings(max_examples=300, deadline=None)
@given(share=st.floats(min_value=0.01, max_value=1.0), offered=st.integers(min_value=0, max_value=500))
def test_property_pace_admits_the_share_rounded_down_with_no_burst(share: float, offered: int) -> None:
    """Slow start admits exactly `floor(share · n)` of n offered attempts (from a
    fresh close), and no window of them more than `ceil(share · window)`."""
    credit, admitted = 0.0, []
    for _ in range(offered):
        go, credit = pace(credit, share)
        admitted.append(go)
        assert 0.0 <= credit < 1.0
    assert sum(admitted) == math.floor(share * offered + 1e-6) or sum(admitted) == math.floor(share * offered)
    for width in (1, 5, 20):
        for start in range(0, max(offered - width, 0) + 1, 7):
            assert sum(admitted[start : start + width]) <= math.ceil(share * width) + 1


def test_pace_at_a_tenth_admits_every_tenth_attempt() -> None:
    credit, admitted = 0.0, []
    for _ in range(30):
        go, credit = pace(credit, 0.1)
        admitted.append(go)
    assert [i for i, go in enumerate(admitted) if go] == [9, 19, 29]
