"""When the fleet's prober probes a target (`turnout.core.active_probe`; SPEC §5, issue #41 item 6)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from turnout.core.active_probe import first_probe_at_s, next_due_in_s, probe_due
from turnout.core.breaker import NOT_BEFORE_SLACK_S, BreakerSettings, BreakerSnapshot, Counted, record

T0 = 1_700_000_000.0
SETTINGS = BreakerSettings(cooldown_s=10.0, max_cooldown_s=20.0)

snapshots = st.builds(
    BreakerSnapshot,
    open=st.booleans(),
    opened_at_s=st.floats(T0 - 100, T0 + 100),
    cooldown_s=st.floats(0.1, 60.0),
    not_before_s=st.one_of(st.just(0.0), st.floats(T0 - 100, T0 + 200)),
)
intervals = st.floats(0.5, 30.0)
lasts = st.one_of(st.none(), st.floats(T0 - 100, T0 + 100))


@given(snap=snapshots, now=st.floats(T0 - 100, T0 + 300), interval=intervals, last=lasts)
def test_a_probe_is_due_only_when_every_rule_allows_it(
    snap: BreakerSnapshot, now: float, interval: float, last: float | None
) -> None:
    due = probe_due(snap, now, interval, last)
    if not snap.open:
        assert not due and next_due_in_s(snap, now, interval, last) == math.inf
        return
    if due:
        assert now >= first_probe_at_s(snap, interval)
        assert now >= snap.not_before_s - NOT_BEFORE_SLACK_S
        assert last is None or now >= last + interval
    else:
        wait = next_due_in_s(snap, now, interval, last)
        assert 0.0 < wait < math.inf
        assert probe_due(snap, now + wait, interval, last), "due once the wait is over"


@given(snap=snapshots, now=st.floats(T0 - 100, T0 + 300), interval=intervals, last=lasts, later=st.floats(0, 100))
def test_a_due_probe_stays_due_as_time_passes(
    snap: BreakerSnapshot, now: float, interval: float, last: float | None, later: float
) -> None:
    if probe_due(snap, now, interval, last):
        assert probe_due(snap, now + later, interval, last)


@given(interval=st.floats(0.5, 30.0), failures=st.integers(1, 12))
def test_failed_probes_keep_the_schedule_at_the_interval_however_long_the_cooldown_grows(
    interval: float, failures: int
) -> None:
    """A target down for a long time: its cooldown doubles to the cap, yet the prober looks
    every `min(cooldown, interval)`, so a recovery is seen within one interval."""
    snap = record(BreakerSnapshot(), Counted.FAILURE, probe=False, now_s=T0, settings=SETTINGS)
    for _ in range(SETTINGS.consecutive_failures + 5):
        snap = record(snap, Counted.FAILURE, probe=False, now_s=T0, settings=SETTINGS)
    assert snap.open
    now, last = T0, None
    for _ in range(failures):
        now += next_due_in_s(snap, now, interval, last)
        gap = now - T0 if last is None else now - last
        assert gap <= (min(SETTINGS.cooldown_s, interval) if last is None else interval) + 1e-6
        assert probe_due(snap, now, interval, last)
        snap = record(snap, Counted.FAILURE, probe=True, now_s=now, settings=SETTINGS)
        last = now
    assert snap.cooldown_s == min(SETTINGS.max_cooldown_s, SETTINGS.cooldown_s * 2**failures)
    assert next_due_in_s(snap, now, interval, last) <= interval + 1e-6


def test_a_provider_rest_is_obeyed_and_a_closed_target_is_never_probed() -> None:
    resting = BreakerSnapshot(open=True, opened_at_s=T0, cooldown_s=1.0, not_before_s=T0 + 30.0)
    assert not probe_due(resting, T0 + 5.0, 1.0, None)
    assert probe_due(resting, T0 + 30.0 - NOT_BEFORE_SLACK_S, 1.0, None)
    assert not probe_due(BreakerSnapshot(not_before_s=T0 + 30.0), T0 + 100.0, 1.0, None)
    assert not probe_due(BreakerSnapshot(closed_at_s=T0), T0 + 100.0, 1.0, None)
