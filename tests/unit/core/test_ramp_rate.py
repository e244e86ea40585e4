"""The ramp by rate and its cell-rate counter (`turnout.core.ramp.ramp_rate`, `rate_slot`; SPEC §5)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from turnout.core.breaker import BreakerSettings, BreakerSnapshot, ramp_share
from turnout.core.ramp import ramp_rate, rate_slot

SETTINGS = BreakerSettings()


@given(
    rate=st.floats(0.5, 500.0),
    gaps=st.lists(st.floats(0.0, 0.5), min_size=1, max_size=300),
    span=st.floats(0.01, 3.0),
)
def test_rate_slot_never_admits_more_than_the_rate_over_any_span(rate: float, gaps: list[float], span: float) -> None:
    now, tat, admitted = 1_700_000_000.0, 0.0, []
    for gap in gaps:
        now += gap
        ok, tat, wait = rate_slot(tat, now, rate)
        assert (wait == 0.0) if ok else (0.0 < wait <= 1.0 / rate + 1e-6)
        if ok:
            admitted.append(now)
    for i, start in enumerate(admitted):
        inside = sum(1 for t in admitted[i:] if t < start + span)
        assert inside <= math.floor(span * rate + 1e-6) + 1


@given(rate=st.floats(0.5, 500.0), start=st.floats(0.0, 1e9))
def test_rate_slot_admits_the_first_call_and_the_one_after_its_wait(rate: float, start: float) -> None:
    ok, tat, _ = rate_slot(0.0, start, rate)
    assert ok
    ok, _, wait = rate_slot(tat, start, rate)
    assert not ok
    assert rate_slot(tat, start + wait, rate)[0]


@given(after=st.floats(-1.0, 30.0), rps=st.floats(0.0, 1000.0))
def test_ramp_rate_is_the_share_of_the_ramps_full_rate_during_slow_start_only(after: float, rps: float) -> None:
    settings = BreakerSettings(slow_start_rps=rps)
    snap = BreakerSnapshot(closed_at_s=1_700_000_000.0)
    now = snap.closed_at_s + after
    rate = ramp_rate(snap, now, settings)
    share = ramp_share(snap, now, settings)
    if share >= 1.0 or rps == 0.0:
        assert rate is None
    else:
        assert rate == share * rps
        assert rps * settings.slow_start_min_share <= rate < rps + 1e-9


def test_ramp_rate_is_none_for_an_open_or_never_closed_target() -> None:
    assert ramp_rate(BreakerSnapshot(), 5.0, SETTINGS) is None
    assert ramp_rate(BreakerSnapshot(open=True, closed_at_s=1.0), 2.0, SETTINGS) is None
    assert ramp_rate(BreakerSnapshot(closed_at_s=1.0), 1.0, SETTINGS) == SETTINGS.slow_start_min_share * 50.0
