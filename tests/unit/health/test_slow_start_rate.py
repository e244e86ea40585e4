"""Slow start by rate (`turnout.health.slow_start`, `turnout.core.ramp.ramp_rate`; SPEC §5):
a recovered target gets at most the ramp's calls per second fleet-wide, whatever the offered load."""

from __future__ import annotations

import math

from support.breakers import RATE_SETTINGS, FakeTime, Fleet, ManualSleep, T
from turnout.core.loop import SkipReason
from turnout.core.ramp import ramp_rate
from turnout.core.types import FailureKind
from turnout.health import RAMP_RETRY_S


async def _closed(fleet: Fleet) -> float:
    """Trip, cool, probe successfully: the close's store time."""
    await fleet.trip_and_cool()
    view, gate = await fleet.probe()
    await fleet.breakers.results.record(T, FailureKind.SUCCESS, probe_token=gate.probe_token, error="", view=view)
    return fleet.time.epoch


async def test_the_first_attempt_after_a_close_goes_and_a_herd_at_that_instant_does_not(
    time: FakeTime, sleeper: ManualSleep
) -> None:
    fleet = Fleet(time, sleeper, settings=RATE_SETTINGS)
    await _closed(fleet)
    processes = [fleet.breakers, fleet.process(), fleet.process()]  # three processes, one shared counter
    gates = [await p.gate.admit(T, await p.reads.view([T])) for p in processes for _ in range(300)]
    assert sum(g.admitted for g in gates) == 1
    refused = [g for g in gates if not g.admitted]
    assert all(g.reason is SkipReason.RAMPING for g in refused)
    assert all(0 < (g.reopen_in_s or 0) <= RAMP_RETRY_S for g in refused)


async def test_a_herd_gets_the_ramps_calls_per_second_and_full_traffic_after_it(
    time: FakeTime, sleeper: ManualSleep
) -> None:
    """1,000 attempts offered per second (one every ms) for 12 s after the close: each second
    admits at most the ramp's rate at its end (+1), rising; after `slow_start_s` all go."""
    fleet = Fleet(time, sleeper, settings=RATE_SETTINGS)
    closed_at = await _closed(fleet)
    per_second: list[int] = []
    for second in range(12):
        admitted = 0
        for _ in range(1000):
            admitted += (await fleet.admit()).admitted
            time.advance(0.001)
        per_second.append(admitted)
        end = closed_at + second + 1
        snap = await fleet.snapshot()
        rate = ramp_rate(snap, end - 1e-9, RATE_SETTINGS)
        if rate is not None:
            assert admitted <= math.ceil(rate) + 1, (second, per_second)
    assert per_second[0] <= 10 and per_second[4] <= 29, per_second  # 5/s at the close, 9.5/s at 1 s, 27.5/s at 5 s
    assert max(per_second[:10]) <= RATE_SETTINGS.slow_start_rps + 1, per_second
    assert per_second == sorted(per_second), per_second  # the ramp only rises
    assert per_second[-1] == 1000, per_second  # the ramp is over


async def test_no_rate_outside_slow_start_costs_no_store_call(time: FakeTime, sleeper: ManualSleep) -> None:
    fleet = Fleet(time, sleeper, settings=RATE_SETTINGS)
    taken: list[str] = []
    original = fleet.store.take_ramp_slot

    async def counting(target: str, rate: float) -> float:
        taken.append(target)
        return await original(target, rate)

    fleet.store.take_ramp_slot = counting  # type: ignore[method-assign]
    for _ in range(20):
        assert (await fleet.admit()).admitted
    assert taken == [], "a target that never closed after a trip takes no rate counter"
    await _closed(fleet)
    await fleet.admit()
    assert taken == [T]
    time.advance(RATE_SETTINGS.slow_start_s)
    await fleet.admit()
    assert taken == [T], "after the ramp: no counter"
