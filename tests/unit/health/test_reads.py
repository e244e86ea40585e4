"""`Breakers` keeps a health read for `cache_s` seconds (issue: Performance), and never
hides a change that matters: its own writes at once, others' announced ones once
`forget` hears them (`keys.HEALTH_CHANNEL`). Which writes are announced is tested too."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from support.clocks import FakeClock
from turnout.core.breaker import BreakerSettings, BreakerSnapshot
from turnout.core.types import FailureKind
from turnout.health import Breakers
from turnout.state.breaker_store import Loaded, MemoryBreakerStore, Speed, SpeedSamples

T = "acme/model-a"
U = "acme/model-b"


class Watched(MemoryBreakerStore):
    """A memory store that counts loads and keeps each write's `notify`."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.clock = clock
        self.loads = 0
        self.announced: list[bool] = []

    async def load(self, targets: Sequence[str], caps: Sequence[str] = ()) -> Loaded:
        self.loads += 1
        return await super().load(targets, caps)

    def clear(self) -> None:
        """Lose every snapshot (Redis flushed)."""
        self.__init__(self.clock)  # type: ignore[misc]

    async def compare_and_set(
        self, target: str, version: int, snapshot: BreakerSnapshot, speed: SpeedSamples = None, *, notify: bool = False
    ) -> Loaded | None:
        self.announced.append(notify)
        return await super().compare_and_set(target, version, snapshot, speed, notify=notify)


def _breakers(clock: FakeClock, store: Watched, cache_s: float = 0.1) -> Breakers:
    return Breakers.over(store, BreakerSettings(), clock=clock, wall=clock, cache_s=cache_s)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


async def test_a_read_serves_the_same_subjects_for_cache_s_then_is_read_again(clock: FakeClock) -> None:
    store = Watched(clock)
    breakers = _breakers(clock, store)
    first = await breakers.reads.view([T, U])
    await clock.sleep(0.09)
    kept = await breakers.reads.view([T, U])
    assert store.loads == 1
    assert kept.age_s() == pytest.approx(0.09), "a kept read is as old as the read"
    assert kept.store_now() == pytest.approx(first.now_s + 0.09)
    await breakers.reads.view([T])  # other subjects: their own read
    assert store.loads == 2
    await clock.sleep(0.02)
    await breakers.reads.view([T, U])
    assert store.loads == 3, "older than cache_s: read again"


async def test_without_cache_s_every_view_reads(clock: FakeClock) -> None:
    store = Watched(clock)
    breakers = _breakers(clock, store, cache_s=0.0)
    for _ in range(3):
        await breakers.reads.view([T])
    assert store.loads == 3


async def test_forget_drops_every_kept_read(clock: FakeClock) -> None:
    store = Watched(clock)
    breakers = _breakers(clock, store)
    await breakers.reads.view([T])
    await breakers.reads.view([U])
    breakers.reads.forget(T)
    await breakers.reads.view([U])
    assert store.loads == 3


async def test_a_kept_read_shows_the_process_own_later_writes(clock: FakeClock) -> None:
    """A plain success is not announced, yet the same process sees it in its next view."""
    store = Watched(clock)
    breakers = _breakers(clock, store)
    view = await breakers.reads.view([T])
    await breakers.results.record(T, FailureKind.SUCCESS, probe_token=None, error="", view=view)
    await breakers.results.drain()  # a plain success returns before its write
    assert store.announced == [False]
    again = await breakers.reads.view([T])
    assert store.loads == 1
    assert again.entries[T].version == 1 and again.snapshot(T).successes > 0


async def test_a_failure_is_announced_and_drops_the_kept_reads(clock: FakeClock) -> None:
    store = Watched(clock)
    breakers = _breakers(clock, store)
    view = await breakers.reads.view([T])
    await breakers.reads.view([U])
    await breakers.results.record(T, FailureKind.SERVER_ERROR, probe_token=None, error="boom", view=view)
    assert store.announced == [True]
    await breakers.reads.view([U])
    assert store.loads == 3, "the announcing process forgot its kept reads too"


async def test_a_read_begun_before_a_forget_is_not_kept(clock: FakeClock) -> None:
    """A change announced while a read is in flight: that read may predate it, so it serves only its request."""

    class ForgetMidRead(Watched):
        breakers: Breakers | None = None

        async def load(self, targets: Sequence[str], caps: Sequence[str] = ()) -> Loaded:
            assert self.breakers is not None
            self.breakers.reads.forget(T)
            return await super().load(targets, caps)

    store = ForgetMidRead(clock)
    store.breakers = breakers = _breakers(clock, store)
    await breakers.reads.view([T])
    await breakers.reads.view([T])
    assert store.loads == 2


async def test_a_probe_success_and_a_rest_are_announced_a_plain_success_is_not(clock: FakeClock) -> None:
    store = Watched(clock)
    breakers = _breakers(clock, store)
    await breakers.results.record(
        T, FailureKind.SUCCESS, probe_token=None, error="", view=await breakers.reads.view([T])
    )
    await breakers.results.drain()  # a plain success returns before its write
    await breakers.results.record(
        T,
        FailureKind.RATE_LIMITED,
        probe_token=None,
        error="slow down",
        view=await breakers.reads.view([T]),
        retry_after_s=30,
    )
    for _ in range(5):
        await breakers.results.record(
            T, FailureKind.SERVER_ERROR, probe_token=None, error="x", view=await breakers.reads.view([T])
        )
    await clock.sleep(3600)
    view = await breakers.reads.view([T])
    gate = await breakers.gate.admit(T, view)
    assert gate.probe
    await breakers.results.record(T, FailureKind.SUCCESS, probe_token=gate.probe_token, error="", view=view)
    assert store.announced[0] is False, "a plain success"
    assert store.announced[1] is True, "a rest (Retry-After)"
    assert all(store.announced[1:]), "failures, and the probe's success that closes the breaker"


async def test_a_read_after_the_keys_were_lost_wins_over_a_higher_version_seen_before(clock: FakeClock) -> None:
    """Versions start again when Redis loses the keys (a flush, a restart without AOF): what the
    process saw last counts, not the highest version, for its views and for its next write."""
    store = Watched(clock)
    breakers = _breakers(clock, store)
    for _ in range(5):
        await breakers.results.record(
            T, FailureKind.SERVER_ERROR, probe_token=None, error="x", view=await breakers.reads.view([T])
        )
    assert (await breakers.reads.view([T])).snapshot(T).open
    store.clear()
    await clock.sleep(0.2)  # past cache_s: read again
    view = await breakers.reads.view([T])
    kept = await breakers.reads.view([T])
    assert view.entries[T].version == 0 and not view.snapshot(T).open
    assert kept.entries[T].version == 0 and not kept.snapshot(T).open, "the kept read, not the old version 5"
    await breakers.results.record(T, FailureKind.SUCCESS, probe_token=None, error="", view=view)
    await breakers.results.drain()
    stored = (await store.load([T])).entries[T]
    assert stored.version == 1 and not stored.snapshot.open and stored.snapshot.run == 0


class Held(Watched):
    """Writes wait until released."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.release = asyncio.Event()

    async def compare_and_set(
        self, target: str, version: int, snapshot: BreakerSnapshot, speed: SpeedSamples = None, *, notify: bool = False
    ) -> Loaded | None:
        await self.release.wait()
        return await super().compare_and_set(target, version, snapshot, speed, notify=notify)


async def test_a_plain_success_returns_before_its_write_a_failure_waits_for_it(clock: FakeClock) -> None:
    """The answer of a success does not wait for the breaker's write (one round trip off every
    request); a failure's does, so the next request already sees it."""
    store = Held(clock)
    breakers = _breakers(clock, store)
    view = await breakers.reads.view([T])
    succeeding = asyncio.create_task(
        breakers.results.record(T, FailureKind.SUCCESS, probe_token=None, error="", view=view)
    )
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert succeeding.done(), "the success waited for its write"
    failing = asyncio.create_task(
        breakers.results.record(T, FailureKind.SERVER_ERROR, probe_token=None, error="x", view=view)
    )
    await asyncio.sleep(0)
    assert not failing.done()
    store.release.set()
    await failing
    await breakers.results.drain()
    stored = (await store.load([T])).entries[T].snapshot
    assert stored.successes > 0 and stored.run == 1


async def test_a_first_measure_of_a_target_is_announced_and_waited_for(clock: FakeClock) -> None:
    """A target's first speed sample changes how the latency and throughput orderings rank it, so
    the success carrying it is written before the answer and announced; later samples ride quietly."""
    store = Watched(clock)
    breakers = _breakers(clock, store)
    first = Speed(ttft_ms=250.0, tokens_per_s=None)
    await breakers.results.record(
        T, FailureKind.SUCCESS, probe_token=None, error="", view=await breakers.reads.view([T]), measures=first
    )
    assert store.announced == [True], "written (and announced) before record returned"
    view = await breakers.reads.view([T])
    assert view.speeds[T].ttft_ms == 250.0, "the announcement dropped the kept read"
    await breakers.results.record(T, FailureKind.SUCCESS, probe_token=None, error="", view=view, measures=first)
    await breakers.results.drain()
    assert store.announced == [True, False]
