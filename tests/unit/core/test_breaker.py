"""Table tests and properties for turnout.core.breaker (SPEC §5 circuit breaker).

Pure and synchronous: time is a float passed in, no store, no clock.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings as hsettings
from hypothesis import strategies as st

from turnout.core.breaker import (
    CLOSED,
    Admission,
    BreakerSettings,
    BreakerSnapshot,
    BreakerState,
    Counted,
    admit,
    cooldown_for,
    record,
    reopen_in_s,
    state_at,
    success_rate,
)

DEFAULTS = BreakerSettings()
NOW = 100.0

# Snapshots that are CLOSED / OPEN / HALF_OPEN at NOW (cooldown 30 s, first trip).
AT_CLOSED = BreakerSnapshot(consecutive_failures=1, window="10", last_error="earlier")
AT_OPEN = BreakerSnapshot(open=True, trips=1, opened_at_s=90.0, cooldown_s=30.0, window="000", last_error="boom")
AT_HALF_OPEN = msgspec.structs.replace(AT_OPEN, opened_at_s=60.0)
STARTS = {"closed": AT_CLOSED, "open": AT_OPEN, "half_open": AT_HALF_OPEN}


def _replace(snapshot: BreakerSnapshot, **changes: Any) -> BreakerSnapshot:
    return msgspec.structs.replace(snapshot, **changes)


# ------------------------------------------------------------ the transition table

_REOPENED = BreakerSnapshot(
    open=True, consecutive_failures=0, trips=2, opened_at_s=NOW, cooldown_s=60.0, window="0000", last_error="err"
)

# (start, counted, probe, expected snapshot after one result at NOW with error "err")
TRANSITIONS = [
    # CLOSED: the probe flag is irrelevant; a success ends the failure run, a failure extends it.
    ("closed", Counted.SUCCESS, False, _replace(AT_CLOSED, consecutive_failures=0, window="101")),
    ("closed", Counted.SUCCESS, True, _replace(AT_CLOSED, consecutive_failures=0, window="101")),
    ("closed", Counted.FAILURE, False, _replace(AT_CLOSED, consecutive_failures=2, window="100", last_error="err")),
    ("closed", Counted.FAILURE, True, _replace(AT_CLOSED, consecutive_failures=2, window="100", last_error="err")),
    ("closed", Counted.NEUTRAL, False, AT_CLOSED),
    ("closed", Counted.NEUTRAL, True, AT_CLOSED),
    # OPEN (cooling down): late results of attempts admitted before the trip only enter the window;
    # a probe result (a permit that outlived the reopen) is applied like one in HALF_OPEN.
    ("open", Counted.SUCCESS, False, _replace(AT_OPEN, window="0001")),
    ("open", Counted.SUCCESS, True, BreakerSnapshot(window="1")),
    ("open", Counted.FAILURE, False, _replace(AT_OPEN, window="0000")),
    ("open", Counted.FAILURE, True, _REOPENED),
    ("open", Counted.NEUTRAL, False, AT_OPEN),
    ("open", Counted.NEUTRAL, True, AT_OPEN),
    # HALF_OPEN: the probe's success closes (trips and window reset), its failure reopens with
    # a doubled cooldown; non-probe results only enter the window.
    ("half_open", Counted.SUCCESS, False, _replace(AT_HALF_OPEN, window="0001")),
    ("half_open", Counted.SUCCESS, True, BreakerSnapshot(window="1")),
    ("half_open", Counted.FAILURE, False, _replace(AT_HALF_OPEN, window="0000")),
    ("half_open", Counted.FAILURE, True, _REOPENED),
    ("half_open", Counted.NEUTRAL, False, AT_HALF_OPEN),
    ("half_open", Counted.NEUTRAL, True, AT_HALF_OPEN),
]


def test_start_snapshots_are_in_the_states_they_are_named_after() -> None:
    assert {name: state_at(snap, NOW) for name, snap in STARTS.items()} == {
        "closed": BreakerState.CLOSED,
        "open": BreakerState.OPEN,
        "half_open": BreakerState.HALF_OPEN,
    }


@pytest.mark.parametrize(
    ("start", "counted", "probe", "expected"),
    TRANSITIONS,
    ids=[f"{s}-{c.value}-{'probe' if p else 'plain'}" for s, c, p, _ in TRANSITIONS],
)
def test_breaker_transition_table(start: str, counted: Counted, probe: bool, expected: BreakerSnapshot) -> None:
    after = record(STARTS[start], counted, probe=probe, now_s=NOW, settings=DEFAULTS, error="err")
    assert after == expected


@pytest.mark.parametrize(
    ("start", "probe", "state_after"),
    [
        ("closed", False, BreakerState.CLOSED),
        ("open", False, BreakerState.OPEN),
        ("half_open", False, BreakerState.HALF_OPEN),
        ("half_open", True, BreakerState.OPEN),
    ],
    ids=["closed-below-threshold-stays", "open-plain-stays-open", "half-open-plain-stays", "half-open-probe-reopens"],
)
def test_breaker_failure_state_after(start: str, probe: bool, state_after: BreakerState) -> None:
    after = record(STARTS[start], Counted.FAILURE, probe=probe, now_s=NOW, settings=DEFAULTS)
    assert state_at(after, NOW) is state_after


def test_breaker_probe_failure_keeps_the_last_error_when_none_is_given() -> None:
    after = record(AT_HALF_OPEN, Counted.FAILURE, probe=True, now_s=NOW, settings=DEFAULTS)
    assert after.last_error == "boom"


# ------------------------------------------------------------ consecutive failures


@pytest.mark.parametrize("threshold", [1, 2, 3, 5], ids=lambda n: f"threshold-{n}")
def test_breaker_trips_at_exactly_consecutive_failures(threshold: int) -> None:
    cfg = BreakerSettings(consecutive_failures=threshold)
    snap, t = CLOSED, NOW
    for n in range(1, threshold):
        snap = record(snap, Counted.FAILURE, probe=False, now_s=t, settings=cfg, error=f"e{n}")
        assert not snap.open, f"opened after {n} < {threshold} failures"
        assert snap.consecutive_failures == n
        t += 1.0
    snap = record(snap, Counted.FAILURE, probe=False, now_s=t, settings=cfg, error="last")
    assert snap == BreakerSnapshot(
        open=True, consecutive_failures=0, trips=1, opened_at_s=t, cooldown_s=30.0,
        window="0" * threshold, last_error="last",
    )
    assert state_at(snap, t) is BreakerState.OPEN


def test_breaker_success_between_failures_restarts_the_run() -> None:
    snap = CLOSED
    for counted in [Counted.FAILURE, Counted.FAILURE, Counted.SUCCESS, Counted.FAILURE, Counted.FAILURE]:
        snap = record(snap, counted, probe=False, now_s=NOW, settings=DEFAULTS)
    assert not snap.open
    assert snap.consecutive_failures == 2
    snap = record(snap, Counted.FAILURE, probe=False, now_s=NOW, settings=DEFAULTS)
    assert snap.open


def test_breaker_neutral_between_failures_does_not_break_the_run() -> None:
    snap = CLOSED
    for counted in [Counted.FAILURE, Counted.NEUTRAL, Counted.FAILURE, Counted.NEUTRAL, Counted.FAILURE]:
        snap = record(snap, counted, probe=False, now_s=NOW, settings=DEFAULTS)
    assert snap.open
    assert snap.window == "000"


# ------------------------------------------------------------ failure-rate rule

RATE = BreakerSettings(consecutive_failures=10**6, window=10, failure_rate=0.5, min_results=4)

RATE_CASES = [
    # (settings, window before, counted, opens)
    (RATE, "10", Counted.FAILURE, False),  # 3 results < min_results: the rule does not apply
    (RATE, "000", Counted.SUCCESS, False),  # 3 of 4 failed, but the result is a success
    (RATE, "101", Counted.FAILURE, True),  # 4 results, 2 failed = 50 %: opens
    (RATE, "111", Counted.FAILURE, False),  # 4 results, 25 %
    (RATE, "11111", Counted.FAILURE, False),  # 6 results, 1/6
    (RATE, "1111000", Counted.FAILURE, True),  # 8 results, 4 failed
    (RATE, "1111111111", Counted.FAILURE, False),  # window full: 1 failure in 10
    (RATE, "1111100000", Counted.FAILURE, True),  # oldest "1" drops out: 6 of 10 failed
    (msgspec.structs.replace(RATE, failure_rate=1.0), "111", Counted.FAILURE, False),
    (msgspec.structs.replace(RATE, failure_rate=1.0), "000", Counted.FAILURE, True),  # 1.0 still applies
    (msgspec.structs.replace(RATE, failure_rate=1.01), "000000000", Counted.FAILURE, False),  # > 1.0: disabled
    (msgspec.structs.replace(RATE, failure_rate=1.5), "000", Counted.FAILURE, False),
    (msgspec.structs.replace(RATE, min_results=0), "", Counted.FAILURE, True),  # min 0 acts as 1
    (msgspec.structs.replace(RATE, min_results=10), "00000000", Counted.FAILURE, False),  # 9 < 10
    (msgspec.structs.replace(RATE, min_results=10), "000000000", Counted.FAILURE, True),  # 10 = 10
]


@pytest.mark.parametrize(
    ("cfg", "window", "counted", "opens"),
    RATE_CASES,
    ids=[
        "below-min-results", "success-never-opens", "at-min-results-at-rate", "at-min-results-below-rate",
        "above-min-below-rate", "above-min-at-rate", "full-window-below-rate", "trimmed-window-at-rate",
        "rate-1.0-below", "rate-1.0-all-failed", "rate-1.01-disabled", "rate-1.5-disabled",
        "min-results-0", "one-below-min-results", "exactly-min-results",
    ],
)
def test_breaker_failure_rate_rule(cfg: BreakerSettings, window: str, counted: Counted, opens: bool) -> None:
    snap = BreakerSnapshot(window=window)
    after = record(snap, counted, probe=False, now_s=NOW, settings=cfg, error="rate")
    assert after.open is opens
    if opens:
        assert after.trips == 1
        assert after.opened_at_s == NOW
        assert after.consecutive_failures == 0


# ------------------------------------------------------------ cooldown growth


@pytest.mark.parametrize(
    ("trips", "expected"),
    [(0, 30.0), (1, 30.0), (2, 60.0), (3, 120.0), (4, 240.0), (5, 300.0), (6, 300.0), (40, 300.0), (10**6, 300.0)],
    ids=lambda v: str(v),
)
def test_cooldown_for_doubles_per_trip_and_is_capped(trips: int, expected: float) -> None:
    assert cooldown_for(trips, DEFAULTS) == expected


def test_cooldown_for_cap_below_the_base() -> None:
    assert cooldown_for(1, BreakerSettings(cooldown_s=30.0, max_cooldown_s=10.0)) == 10.0


def test_breaker_cooldown_grows_across_repeated_probe_failures() -> None:
    snap, t = CLOSED, 1000.0
    for _ in range(3):
        snap = record(snap, Counted.FAILURE, probe=False, now_s=t, settings=DEFAULTS)
    cooldowns = [snap.cooldown_s]
    for _ in range(6):
        t = snap.opened_at_s + snap.cooldown_s  # the first instant it is HALF_OPEN
        assert admit(snap, t) is Admission.PROBE
        snap = record(snap, Counted.FAILURE, probe=True, now_s=t, settings=DEFAULTS)
        assert state_at(snap, t) is BreakerState.OPEN
        assert snap.opened_at_s == t
        cooldowns.append(snap.cooldown_s)
    assert cooldowns == [30.0, 60.0, 120.0, 240.0, 300.0, 300.0, 300.0]
    assert snap.trips == 7


def test_breaker_probe_success_resets_trips_and_window() -> None:
    snap = BreakerSnapshot(
        open=True, trips=5, opened_at_s=0.0, cooldown_s=300.0, window="0101000", last_error="boom"
    )
    after = record(snap, Counted.SUCCESS, probe=True, now_s=400.0, settings=DEFAULTS)
    assert after == BreakerSnapshot(window="1")
    assert state_at(after, 400.0) is BreakerState.CLOSED
    # The next trip starts again from the base cooldown.
    for _ in range(3):
        after = record(after, Counted.FAILURE, probe=False, now_s=401.0, settings=DEFAULTS)
    assert (after.trips, after.cooldown_s) == (1, 30.0)


# ------------------------------------------------------------ window


@pytest.mark.parametrize("size", [1, 5, 50], ids=lambda n: f"window-{n}")
def test_breaker_window_is_trimmed_to_settings_window(size: int) -> None:
    cfg = BreakerSettings(window=size, consecutive_failures=10**6, failure_rate=2.0)
    marks = ""
    snap = CLOSED
    for i in range(size * 3 + 1):
        counted = Counted.SUCCESS if i % 3 else Counted.FAILURE
        snap = record(snap, counted, probe=False, now_s=NOW, settings=cfg)
        marks += "1" if counted is Counted.SUCCESS else "0"
        assert snap.window == marks[-size:]
    assert len(snap.window) == size


def test_breaker_window_keeps_growing_while_open() -> None:
    cfg = BreakerSettings(window=4)
    snap = msgspec.structs.replace(AT_OPEN, window="0")
    for _ in range(6):
        snap = record(snap, Counted.SUCCESS, probe=False, now_s=NOW, settings=cfg)
    assert snap.window == "1111"
    assert snap.open


# ------------------------------------------------------------ state_at / admit / reopen_in_s

OPENED = BreakerSnapshot(open=True, trips=1, opened_at_s=100.0, cooldown_s=30.0, window="000")

STATE_CASES = [
    (CLOSED, 0.0, BreakerState.CLOSED, Admission.ADMIT, 0.0),
    (BreakerSnapshot(window="000", consecutive_failures=2), 1e9, BreakerState.CLOSED, Admission.ADMIT, 0.0),
    (OPENED, 100.0, BreakerState.OPEN, Admission.REJECT, 30.0),
    (OPENED, 125.0, BreakerState.OPEN, Admission.REJECT, 5.0),
    (OPENED, 129.999, BreakerState.OPEN, Admission.REJECT, pytest.approx(0.001)),
    (OPENED, 130.0, BreakerState.HALF_OPEN, Admission.PROBE, 0.0),
    (OPENED, 130.001, BreakerState.HALF_OPEN, Admission.PROBE, 0.0),
    (OPENED, 10_000.0, BreakerState.HALF_OPEN, Admission.PROBE, 0.0),
    (OPENED, 50.0, BreakerState.OPEN, Admission.REJECT, 80.0),  # clock behind the trip
]


@pytest.mark.parametrize(
    ("snap", "now", "state", "admission", "reopen"),
    STATE_CASES,
    ids=[
        "closed", "closed-with-failures", "open-at-trip", "open-mid-cooldown", "open-just-before-boundary",
        "half-open-exactly-at-boundary", "half-open-after-boundary", "half-open-long-after", "open-clock-behind",
    ],
)
def test_breaker_state_admission_and_reopen(
    snap: BreakerSnapshot, now: float, state: BreakerState, admission: Admission, reopen: float
) -> None:
    assert state_at(snap, now) is state
    assert admit(snap, now) is admission
    assert reopen_in_s(snap, now) == reopen


@pytest.mark.parametrize(
    ("window", "rate"),
    [("", None), ("1", 1.0), ("0", 0.0), ("1100", 0.5), ("1110", 0.75), ("0" * 49 + "1", 0.02)],
    ids=["no-history", "one-success", "one-failure", "half", "three-quarters", "one-in-fifty"],
)
def test_success_rate(window: str, rate: float | None) -> None:
    assert success_rate(BreakerSnapshot(window=window)) == rate


def test_success_rate_ignores_the_breaker_state() -> None:
    assert success_rate(msgspec.structs.replace(OPENED, window="01")) == 0.5


# ------------------------------------------------------------ properties

_settings = st.builds(
    BreakerSettings,
    consecutive_failures=st.integers(1, 6),
    window=st.integers(1, 20),
    failure_rate=st.sampled_from([0.3, 0.5, 0.8, 1.0, 1.5]),
    min_results=st.integers(0, 10),
    cooldown_s=st.sampled_from([1.0, 5.0, 30.0]),
    max_cooldown_s=st.sampled_from([1.0, 30.0, 120.0, 300.0]),
)
_events = st.lists(
    st.tuples(
        st.sampled_from(list(Counted)),
        st.booleans(),
        st.floats(min_value=0.0, max_value=400.0, allow_nan=False, allow_infinity=False),
    ),
    max_size=60,
)


@hsettings(max_examples=300, deadline=None)
@given(cfg=_settings, events=_events)
def test_breaker_properties_hold_for_any_event_sequence(
    cfg: BreakerSettings, events: list[tuple[Counted, bool, float]]
) -> None:
    snap, now = CLOSED, 1000.0
    for counted, probe, dt in events:
        now += dt
        before_state = state_at(snap, now)
        after = record(snap, counted, probe=probe, now_s=now, settings=cfg, error="x")
        after_state = state_at(after, now)

        assert len(after.window) <= cfg.window
        assert set(after.window) <= {"0", "1"}
        assert after.trips >= 0
        assert after.consecutive_failures >= 0
        assert after.cooldown_s <= cfg.max_cooldown_s
        if not after.open:
            assert after.consecutive_failures < cfg.consecutive_failures
        if counted is Counted.NEUTRAL:
            assert after == snap
        if before_state is BreakerState.CLOSED and after_state is not BreakerState.CLOSED:
            assert counted is Counted.FAILURE
        if before_state is not BreakerState.CLOSED and after_state is BreakerState.CLOSED:
            assert counted is Counted.SUCCESS and probe
        if after.open and not snap.open:
            assert counted is Counted.FAILURE
            assert after.trips == snap.trips + 1
            assert after.opened_at_s == now
        if snap.open and not after.open:
            assert counted is Counted.SUCCESS and probe
            assert after == BreakerSnapshot(window="1")
        snap = after


@hsettings(max_examples=200, deadline=None)
@given(cfg=_settings, trips=st.integers(0, 10**6))
def test_cooldown_for_is_monotonic_and_capped(cfg: BreakerSettings, trips: int) -> None:
    assert 0.0 < cooldown_for(trips, cfg) <= cfg.max_cooldown_s
    assert cooldown_for(trips, cfg) <= cooldown_for(trips + 1, cfg)
