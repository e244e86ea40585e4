"""Slow start after a close (`turnout.health.slow_start`; SPEC §5)."""

from __future__ import annotations

import asyncio
import math

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from support.breakers import (
    SETTINGS,
    FakeTime,
    Fleet,
    ManualSleep,
    T,
)
from turnout.core.breaker import (
    ramp_share,
)
from turnout.core.loop import SkipReason
from turnout.core.types import FailureKind
from turnout.health import (
    RAMP_RETRY_S,
    Gate,
)

# ------------------------------------------------------------------ slow start


async def _closed_by_probe(fleet: Fleet) -> float:
    await fleet.trip_and_cool()
    view, gate = await fleet.probe()
    await fleet.breakers.results.record(T, FailureKind.SUCCESS, probe_token=gate.probe_token, error="", view=view)
    return fleet.time.epoch


SLOW_START_CASES = [
    (0.0, 10, 1),  # share 0.1
    (0.0, 25, 2),
    (5.0, 20, 11),  # share 0.55 half-way
    (9.0, 100, 91),  # share 0.91
    (10.0, 7, 7),  # full traffic after slow_start_s
    (60.0, 3, 3),
]


@pytest.mark.parametrize(
    ("after_s", "offered", "admitted"), SLOW_START_CASES, ids=[f"{a}s-{n}" for a, n, _ in SLOW_START_CASES]
)
async def test_breakers_slow_start_paces_the_share_of_offered_attempts(
    fleet: Fleet, after_s: float, offered: int, admitted: int
) -> None:
    await _closed_by_probe(fleet)
    fleet.time.advance(after_s)
    gates = [await fleet.admit() for _ in range(offered)]
    assert sum(g.admitted for g in gates) == admitted
    left_out = Gate(admitted=False, reopen_in_s=RAMP_RETRY_S, reason=SkipReason.RAMPING)
    assert all(g == Gate(admitted=True) or g == left_out for g in gates)


@hsettings(max_examples=60, deadline=None)
@given(after_s=st.floats(0.0, 15.0), offered=st.integers(1, 60))
def test_breakers_slow_start_never_admits_more_than_the_ramp(after_s: float, offered: int) -> None:
    """The admitted attempts are the configured share of those offered, rounded
    down: never a burst above the ramp (SPEC §5 slow start)."""

    async def scenario() -> None:
        time = FakeTime()
        fleet = Fleet(time, ManualSleep(time))  # the probe records before any renewal sleeps
        closed_at = await _closed_by_probe(fleet)
        fleet.time.advance(after_s)
        share = ramp_share(await fleet.snapshot(), fleet.time.epoch, SETTINGS)
        gates = [await fleet.admit() for _ in range(offered)]
        assert sum(g.admitted for g in gates) == math.floor(share * offered + 1e-9)
        assert all(g.admitted or g.reason is SkipReason.RAMPING for g in gates)
        assert share == 1.0 or fleet.time.epoch - closed_at < SETTINGS.slow_start_s

    asyncio.run(scenario())


async def test_breakers_slow_start_applies_to_a_view_read_before_the_close(fleet: Fleet) -> None:
    """B read HALF_OPEN; the probe A closes the breaker before B admits from its
    still-fresh view. B is not the probe, and it is held to the slow-start share
    like every other request."""
    await fleet.trip_and_cool()
    view_b = await fleet.view()
    view_a, gate_a = await fleet.probe()
    await fleet.breakers.results.record(T, FailureKind.SUCCESS, probe_token=gate_a.probe_token, error="", view=view_a)
    gate = await fleet.breakers.gate.admit(T, view_b)  # the first attempt after the close: 10 % share, paced
    assert gate == Gate(admitted=False, reopen_in_s=RAMP_RETRY_S, reason=SkipReason.RAMPING)
    assert await fleet.permit_free(), "the permit taken to check was given back"
