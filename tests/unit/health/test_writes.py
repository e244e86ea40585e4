"""Compare-and-set writes: conflicts, batches, cancelled callers (`turnout.health.writes`, `results`)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from support.breakers import (
    FRESH_RUN,
    CountingStore,
    FakeTime,
    Fleet,
    ManualSleep,
    T,
    real_sleep,
)
from turnout.core.breaker import (
    CLOSED,
    BreakerSnapshot,
    BreakerState,
)
from turnout.core.types import FailureKind
from turnout.health import (
    Breakers,
)
from turnout.state.breaker_store import Loaded, Speed, SpeedSample, SpeedSamples, Versioned, samples

# ------------------------------------------------------------------ CAS retries


class AlwaysConflicting(CountingStore):
    """Every write loses a race."""

    writes = 0

    async def compare_and_set(
        self, target: str, version: int, snapshot: BreakerSnapshot, speed: SpeedSamples = None, *, notify: bool = False
    ) -> Loaded | None:
        self.writes += 1
        return Loaded(now_s=self._clock(), entries={target: Versioned(version + 1, CLOSED)})


async def test_breakers_record_gives_up_after_bounded_conflicts(
    time: FakeTime, sleeper: ManualSleep, caplog: pytest.LogCaptureFixture
) -> None:
    store = AlwaysConflicting(time)
    fleet = Fleet(time, sleeper, store=store)
    fleet.rng.draw = 0.999
    with caplog.at_level(logging.ERROR, logger="turnout.breaker"):
        await fleet.result(FailureKind.SERVER_ERROR, error="x")
    assert store.writes == 100
    assert "not recorded" in caplog.text
    # Backoff between conflicting writes: full jitter, at most 20 ms.
    assert sleeper.delays and max(sleeper.delays) <= 0.02
    assert sleeper.delays == sorted(sleeper.delays), "the jitter's range grows, then stays capped"


async def test_breakers_record_recomputes_from_the_current_entry_on_conflict(fleet: Fleet) -> None:
    stale = await fleet.view()
    await fleet.fail(FRESH_RUN - 1)
    await fleet.breakers.results.record(T, FailureKind.SERVER_ERROR, probe_token=None, error="last", view=stale)
    snap = await fleet.snapshot()
    assert snap.open, "the last failure must count on top of the stored ones"
    assert snap.last_error == "last"
    assert stale.entries[T].version == FRESH_RUN
    assert fleet.transitions == [(T, BreakerState.CLOSED, BreakerState.OPEN)]


class HeldWrites(CountingStore):
    """Writes wait until released, so results queue behind one in flight; keeps what each write carried."""

    def __init__(self, time: FakeTime) -> None:
        super().__init__(time)
        self.release = asyncio.Event()
        self.written: list[tuple[BreakerSnapshot, tuple[SpeedSample, ...]]] = []

    async def compare_and_set(
        self, target: str, version: int, snapshot: BreakerSnapshot, speed: SpeedSamples = None, *, notify: bool = False
    ) -> Loaded | None:
        await self.release.wait()
        self.written.append((snapshot, samples(speed)))
        return await super().compare_and_set(target, version, snapshot, speed, notify=notify)


async def test_breakers_results_queued_behind_a_write_go_in_the_next_one_in_order(
    time: FakeTime, sleeper: ManualSleep
) -> None:
    """Ten results recorded while one write is in flight are written by one more
    compare-and-set, as if applied one by one: the same counts, the run, the last
    error, and every speed sample folded in order."""
    store = HeldWrites(time)
    fleet = Fleet(time, sleeper, store=store)
    view = await fleet.view()
    speed = Speed(ttft_ms=10.0, tokens_per_s=None)
    first = asyncio.create_task(
        fleet.breakers.results.record(T, FailureKind.SUCCESS, probe_token=None, error="", view=view, measures=speed)
    )
    await real_sleep(0)
    queued = [
        asyncio.create_task(
            fleet.breakers.results.record(
                T,
                FailureKind.SERVER_ERROR,
                probe_token=None,
                error=f"e{i}",
                view=view,
                measures=Speed(ttft_ms=float(i), tokens_per_s=None),
            )
        )
        for i in range(10)
    ]
    await real_sleep(0)
    store.release.set()
    await asyncio.gather(first, *queued)
    assert len(store.written) == 2, "one write for the first result, one for the ten queued behind it"
    one_by_one = CountingStore(time)
    expected = Breakers.over(one_by_one, fleet.settings, clock=time.monotonic)
    await expected.results.record(
        T, FailureKind.SUCCESS, probe_token=None, error="", view=await expected.reads.view([T])
    )
    for i in range(10):
        await expected.results.record(
            T, FailureKind.SERVER_ERROR, probe_token=None, error=f"e{i}", view=await expected.reads.view([T])
        )
    last, carried = store.written[1]
    assert (last.run, last.last_error, last.open) == (10, "e9", True)
    assert last == (await one_by_one.load([T])).entries[T].snapshot
    assert [s.ttft_ms for s in carried] == [float(i) for i in range(10)], "samples folded in arrival order"
    assert view.entries[T].version == 2, "the callers' view holds the written snapshot"


async def test_breakers_result_of_a_caller_that_stops_waiting_is_still_written(
    time: FakeTime, sleeper: ManualSleep
) -> None:
    """A caller cancelled while its result waits for the write (client gone) loses
    nothing: the write runs on in its own task."""
    store = HeldWrites(time)
    fleet = Fleet(time, sleeper, store=store)
    view = await fleet.view()
    waiting = asyncio.create_task(
        fleet.breakers.results.record(T, FailureKind.SERVER_ERROR, probe_token=None, error="gone", view=view)
    )
    await real_sleep(0)
    waiting.cancel()
    await asyncio.wait([waiting])
    assert waiting.cancelled()
    store.release.set()
    for _ in range(5):
        await real_sleep(0)
    assert [snap.last_error for snap, _ in store.written] == ["gone"]


async def test_breakers_record_cancelled_while_stopping_the_renewal_stays_cancelled(fleet: Fleet) -> None:
    """A request cancelled (client gone, deadline) while `record` waits for the
    permit's renewal to stop must still end cancelled: the wait may not swallow
    the caller's own cancellation."""
    await fleet.trip_and_cool()
    view, gate = await fleet.probe()
    recording = asyncio.create_task(
        fleet.breakers.results.record(T, FailureKind.SUCCESS, probe_token=gate.probe_token, error="", view=view)
    )
    await real_sleep(0)  # record() runs until it waits for the renewal task to end
    assert not recording.done()
    recording.cancel()
    await asyncio.wait([recording])
    assert recording.cancelled(), "the caller's cancellation was swallowed"
