"""Plain successes of one subject share a write (`turnout.health.writes.QUIET_WINDOW_S`;
issue: Performance): they wait for company up to the quiet window, anything that is
news (a failure, a probe's result) is written at once with them, and `drain` ends
every wait. The windows here are an hour long, so no assertion waits on real time."""

from __future__ import annotations

import asyncio

from support.clocks import FakeClock
from turnout.core.breaker import BreakerSettings, BreakerSnapshot
from turnout.core.types import FailureKind
from turnout.health import Breakers
from turnout.state.breaker_store import Loaded, MemoryBreakerStore, SpeedSamples

T = "acme/model-a"
U = "acme/model-b"
HOUR_S = 3600.0


class Watched(MemoryBreakerStore):
    """A memory store that keeps each write's `notify`, in order."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.announced: list[bool] = []

    async def compare_and_set(
        self, target: str, version: int, snapshot: BreakerSnapshot, speed: SpeedSamples = None, *, notify: bool = False
    ) -> Loaded | None:
        self.announced.append(notify)
        return await super().compare_and_set(target, version, snapshot, speed, notify=notify)


def _breakers(quiet_window_s: float) -> tuple[Watched, Breakers]:
    clock = FakeClock()
    store = Watched(clock)
    return store, Breakers.over(store, BreakerSettings(), clock=clock, wall=clock, quiet_window_s=quiet_window_s)


async def _succeed(breakers: Breakers, target: str, n: int) -> None:
    for _ in range(n):
        view = await breakers.reads.view([target])
        await breakers.results.record(target, FailureKind.SUCCESS, probe_token=None, error="", view=view)


async def _settle_steps(n: int = 20) -> None:
    """Let every ready task run a few steps (no clock involved)."""
    for _ in range(n):
        await asyncio.sleep(0)


async def test_plain_successes_within_the_window_share_one_write() -> None:
    store, breakers = _breakers(HOUR_S)
    await _succeed(breakers, T, 5)
    await _settle_steps()
    assert store.announced == [], "waiting for company: nothing written yet"
    await breakers.results.drain()
    assert store.announced == [False], "one quiet write for five successes"
    assert (await store.load([T])).entries[T].snapshot.successes == 5


async def test_each_subject_waits_on_its_own() -> None:
    store, breakers = _breakers(HOUR_S)
    await _succeed(breakers, T, 2)
    await _succeed(breakers, U, 3)
    await breakers.results.drain()
    loaded = await store.load([T, U])
    assert store.announced == [False, False]
    assert (loaded.entries[T].snapshot.successes, loaded.entries[U].snapshot.successes) == (2, 3)


async def test_a_failure_ends_the_wait_and_is_written_after_the_successes_before_it() -> None:
    store, breakers = _breakers(HOUR_S)
    await _succeed(breakers, T, 3)
    await _settle_steps()
    assert store.announced == [], "the successes wait for company"
    view = await breakers.reads.view([T])
    async with asyncio.timeout(30):  # a failure is waited for: it must not wait out the hour
        await breakers.results.record(T, FailureKind.SERVER_ERROR, probe_token=None, error="HTTP 503", view=view)
    assert store.announced == [True], "one write, announced: the failure is news"
    snap = (await store.load([T])).entries[T].snapshot
    assert snap.successes == 3 and snap.failures == 1
    assert snap.last_error == "HTTP 503"


async def test_without_a_window_each_plain_success_is_written_at_once() -> None:
    store, breakers = _breakers(0.0)
    for n in range(1, 4):
        await _succeed(breakers, T, 1)
        await _settle_steps()
        assert len(store.announced) == n
    await breakers.results.drain()


async def test_the_window_runs_out_on_its_own() -> None:
    store, breakers = _breakers(0.001)
    await _succeed(breakers, T, 1)
    async with asyncio.timeout(30):  # the loop's own timer ends the wait; no drain
        while not store.announced:
            await asyncio.sleep(0.001)
    assert store.announced == [False]
