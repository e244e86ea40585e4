"""One contract suite for the breaker stores (SPEC §5): memory and real Redis.

`MemoryBreakerStore` runs on a fake clock; `RedisBreakerStore` against the
session's `redis-server` (tests/unit/state/conftest.py), where time is real:
the permit-expiry cases wait a short real TTL (0.2 s permits, 0.3 s waits).
fakeredis is not a third store here: it runs the Lua scripts only with
`lupa`, which the dev dependencies do not install.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import msgspec
import pytest
from redis.asyncio import Redis

import turnout.health.probes
import turnout.health.reads
import turnout.health.results
import turnout.health.speed
from turnout.core.breaker import CLOSED, BreakerSettings, BreakerSnapshot, BreakerState, counts
from turnout.core.types import FailureKind
from turnout.health import BreakerHooks, Breakers
from turnout.state import keys
from turnout.state.breaker_store import (
    BreakerStore,
    Loaded,
    MemoryBreakerStore,
    RedisBreakerStore,
    SpeedSample,
    Versioned,
)

T = "acme/model-a"
U = "other/model-b"

TRIPPED = BreakerSnapshot(
    open=True,
    trips=2,
    opened_at_s=1_700_000_123.456789,
    cooldown_s=10.0,
    closed_at_s=1_699_999_000.25,
    successes=12.375,
    failures=3.0625,
    run_weight=2.5,
    counted_at_s=1_700_000_120.125,
    run=4,
    not_before_s=1_700_000_150.5,
    last_error="HTTP 503: upstream overloaded ✗",
    trip_rule="rate",
)
"""Every field away from its default, so a round trip proves each one is stored."""
HEALTHY = BreakerSnapshot(successes=1.0, counted_at_s=1_700_000_000.0)


class FakeClock:
    """Epoch seconds that move only when told."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class StalledRenewals:
    """`asyncio` as `turnout.health.probes` sees it, with the probe permit's renewal
    stalled (a holder whose process froze): sleeps of 50 ms or more never end
    (until cancelled); shorter ones (CAS backoff jitter) are real."""

    async def sleep(self, delay: float) -> None:
        if delay < 0.05:
            await asyncio.sleep(delay)
            return
        await asyncio.get_running_loop().create_future()

    def __getattr__(self, name: str) -> object:
        return getattr(asyncio, name)


REDIS_TIME_SCALE = 4.0
"""Redis runs the TTL tests 4x slower: a 0.8 s permit instead of 0.2 s."""


@pytest.fixture(autouse=True)
def _store_calls_wait_as_long_as_they_take(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hundreds of concurrent reads and compare-and-set rounds on a busy machine may outlast
    the request path's bounds on a health read (`REQUEST_REDIS_TIMEOUT_S`, 0.4 s: CI once saw
    200 concurrent reads time out and degrade) and on recording a result (1 s); these tests are
    about lost updates, not those bounds."""
    monkeypatch.setattr(turnout.health.results, "RECORD_TIMEOUT_S", 120.0)
    for part in (turnout.health.reads, turnout.health.probes, turnout.health.speed):
        monkeypatch.setattr(part, "REQUEST_REDIS_TIMEOUT_S", 120.0)


@dataclass
class Harness:
    """One store under test and how time passes for it.

    `s` scales the tests' TTLs and waits. The memory store's time is fake
    (scale 1: nothing waits). Redis expires permits on its own clock, so
    those tests run in real time; scaled up, a step a loaded machine delays
    by a few hundred ms cannot outlive a permit the test expects alive.
    """

    store: BreakerStore
    advance: Callable[[float], Awaitable[None]]
    expected_now: Callable[[], float]
    clock_tolerance_s: float
    s: float = 1.0


@pytest.fixture(params=["memory", "redis"])
def harness(request: pytest.FixtureRequest) -> Harness:
    if request.param == "memory":
        clock = FakeClock()

        async def advance(seconds: float) -> None:
            clock.now += seconds

        return Harness(MemoryBreakerStore(clock), advance, clock, 0.0)
    client: Redis = request.getfixturevalue("redis_client")
    return Harness(RedisBreakerStore(client), asyncio.sleep, time.time, 1.0, s=REDIS_TIME_SCALE)


# ------------------------------------------------------------------ load


async def test_store_load_of_unknown_targets_is_version_0_and_closed(harness: Harness) -> None:
    loaded = await harness.store.load([T, U])
    assert loaded.entries == {T: Versioned(0, CLOSED), U: Versioned(0, CLOSED)}
    assert not loaded.entries[T].snapshot.open


async def test_store_load_of_no_targets_still_reads_the_clock(harness: Harness) -> None:
    loaded = await harness.store.load([])
    assert loaded.entries == {}
    assert loaded.now_s == pytest.approx(harness.expected_now(), abs=harness.clock_tolerance_s)


async def test_store_load_now_is_the_store_clock(harness: Harness) -> None:
    before = harness.expected_now()
    loaded = await harness.store.load([T])
    assert loaded.now_s == pytest.approx(before, abs=harness.clock_tolerance_s)
    await harness.advance(0.05)
    later = await harness.store.load([T])
    assert later.now_s >= loaded.now_s + 0.05 - 1e-3


# ------------------------------------------------------------------ compare-and-set


async def test_store_cas_with_the_right_version_stores_and_bumps_the_version(harness: Harness) -> None:
    assert await harness.store.compare_and_set(T, 0, TRIPPED) is None
    loaded = await harness.store.load([T, U])
    assert loaded.entries == {T: Versioned(1, TRIPPED), U: Versioned(0, CLOSED)}

    assert await harness.store.compare_and_set(T, 1, HEALTHY) is None
    assert (await harness.store.load([T])).entries[T] == Versioned(2, HEALTHY)


def test_tripped_fixture_sets_every_snapshot_field() -> None:
    """The round trip below proves every field only if TRIPPED sets every one."""
    unset = [f.name for f in msgspec.structs.fields(BreakerSnapshot) if getattr(TRIPPED, f.name) == f.default]
    assert unset == []


async def test_store_snapshot_round_trips_every_field(harness: Harness) -> None:
    await harness.store.compare_and_set(T, 0, TRIPPED)
    stored = (await harness.store.load([T])).entries[T].snapshot
    assert stored == TRIPPED
    assert stored.opened_at_s == 1_700_000_123.456789
    assert (stored.successes, stored.failures, stored.run) == (12.375, 3.0625, 4)


@pytest.mark.parametrize("stale", [0, 1, 3, 7], ids=["never-written", "previous", "ahead", "far-ahead"])
async def test_store_cas_with_a_stale_version_returns_current_and_does_not_write(harness: Harness, stale: int) -> None:
    await harness.store.compare_and_set(T, 0, BreakerSnapshot(run=1, counted_at_s=1_700_000_000.0))
    assert await harness.store.compare_and_set(T, 1, TRIPPED) is None

    current = await harness.store.compare_and_set(T, stale, HEALTHY)
    assert isinstance(current, Loaded)
    assert current.entries == {T: Versioned(2, TRIPPED)}
    assert current.now_s == pytest.approx(harness.expected_now(), abs=harness.clock_tolerance_s)
    assert (await harness.store.load([T])).entries[T] == Versioned(2, TRIPPED)


async def test_store_cas_on_an_unknown_target_with_nonzero_version_returns_closed(harness: Harness) -> None:
    current = await harness.store.compare_and_set(T, 3, TRIPPED)
    assert current is not None
    assert current.entries == {T: Versioned(0, CLOSED)}
    assert (await harness.store.load([T])).entries[T] == Versioned(0, CLOSED)


async def test_store_targets_are_independent(harness: Harness) -> None:
    await harness.store.compare_and_set(T, 0, TRIPPED)
    assert await harness.store.compare_and_set(U, 0, HEALTHY) is None
    loaded = await harness.store.load([T, U])
    assert loaded.entries == {T: Versioned(1, TRIPPED), U: Versioned(1, HEALTHY)}


async def test_store_only_one_of_many_concurrent_cas_on_one_version_wins(harness: Harness) -> None:
    candidates = [BreakerSnapshot(run=i + 1) for i in range(50)]
    replies = await asyncio.gather(*(harness.store.compare_and_set(T, 0, c) for c in candidates))
    winners = [c for c, r in zip(candidates, replies) if r is None]
    assert len(winners) == 1
    assert (await harness.store.load([T])).entries[T] == Versioned(1, winners[0])
    assert all(r.entries[T].version == 1 for r in replies if r is not None)


@pytest.mark.parametrize("workers", [1, 8], ids=["one-process", "eight-processes"])
async def test_store_concurrent_records_lose_no_update(harness: Harness, workers: int) -> None:
    """200 failures recorded concurrently through `Breakers` (each from its own view,
    all read before any write) are all counted; the breaker trips once."""
    # A window of ~4 months: the counts do not decay while the test runs on real time.
    settings = BreakerSettings(window=1e7, consecutive_failures=10**6, min_results=20)
    transitions: list[tuple[str, BreakerState, BreakerState]] = []

    def on_transition(target: str, old: BreakerState, new: BreakerState) -> None:
        transitions.append((target, old, new))

    fleet = [
        Breakers.over(harness.store, settings, hooks=BreakerHooks(on_transition=on_transition)) for _ in range(workers)
    ]
    views = await asyncio.gather(*(fleet[i % workers].reads.view([T]) for i in range(200)))
    assert all(v.entries[T].version == 0 for v in views)

    await asyncio.gather(
        *(
            fleet[i % workers].results.record(T, FailureKind.SERVER_ERROR, probe_token=None, error=f"e{i}", view=view)
            for i, view in enumerate(views)
        )
    )

    entry = (await harness.store.load([T])).entries[T]
    assert 1 <= entry.version <= 200, "a write carries every failure queued while the one before ran"
    snap = entry.snapshot
    successes, failures = counts(snap, snap.counted_at_s, settings)
    assert successes == 0.0 and failures == pytest.approx(200.0, rel=1e-4)
    assert snap.run == 200, "no success ended the run"
    # The rate rule (failure share 1.0 over 20 calls) tripped it exactly once; later
    # failures of attempts admitted before the trip only entered the counts.
    assert (snap.open, snap.trips, snap.trip_rule) == (True, 1, "rate")
    assert transitions == [(T, BreakerState.CLOSED, BreakerState.OPEN)]


# ------------------------------------------------------------------ probe permit


async def test_store_exactly_one_concurrent_acquire_probe_succeeds(harness: Harness) -> None:
    got = await asyncio.gather(*(harness.store.acquire_probe(T, 30.0) for _ in range(50)))
    tokens = [t for t in got if t is not None]
    assert len(tokens) == 1
    assert isinstance(tokens[0], str) and tokens[0]
    assert await harness.store.acquire_probe(U, 30.0) is not None, "permits are per target"


async def test_store_probe_permit_expires_after_its_ttl(harness: Harness) -> None:
    assert await harness.store.acquire_probe(T, harness.s * 0.2) is not None
    assert await harness.store.acquire_probe(T, harness.s * 0.2) is None
    await harness.advance(harness.s * 0.3)
    assert await harness.store.acquire_probe(T, harness.s * 0.2) is not None
    assert await harness.store.acquire_probe(T, harness.s * 0.2) is None


async def test_store_release_makes_the_probe_available_again(harness: Harness) -> None:
    token = await harness.store.acquire_probe(T, 30.0)
    assert token is not None
    await harness.store.release_probe(T, token)
    assert await harness.store.acquire_probe(T, 30.0) is not None
    assert await harness.store.acquire_probe(T, 30.0) is None


async def test_store_release_of_a_free_permit_is_a_no_op(harness: Harness) -> None:
    await harness.store.release_probe(T, "no-such-token")
    assert await harness.store.acquire_probe(T, 30.0) is not None


async def test_store_probe_tokens_differ_between_holders(harness: Harness) -> None:
    tokens = []
    for _ in range(20):
        token = await harness.store.acquire_probe(T, 30.0)
        assert token is not None
        tokens.append(token)
        await harness.store.release_probe(T, token)
    assert len(set(tokens)) == 20


async def test_store_release_with_a_wrong_token_keeps_the_permit(harness: Harness) -> None:
    token = await harness.store.acquire_probe(T, 30.0)
    assert token is not None
    for wrong in ["", "1", "wrong", token[:-1], token + "0", token.upper() if token.upper() != token else "X" + token]:
        await harness.store.release_probe(T, wrong)
        assert await harness.store.acquire_probe(T, 30.0) is None, f"released by {wrong!r}"
    await harness.store.release_probe(U, token)  # the right token, for another target
    assert await harness.store.acquire_probe(T, 30.0) is None
    await harness.store.release_probe(T, token)
    assert await harness.store.acquire_probe(T, 30.0) is not None


async def test_store_release_by_the_holder_of_an_expired_permit_keeps_the_new_holders(harness: Harness) -> None:
    old = await harness.store.acquire_probe(T, harness.s * 0.2)
    assert old is not None
    await harness.advance(harness.s * 0.3)
    new = await harness.store.acquire_probe(T, 30.0)
    assert new is not None and new != old

    await harness.store.release_probe(T, old)  # the probe that outlived its permit finishes
    assert await harness.store.acquire_probe(T, 30.0) is None, "the old holder freed the new holder's permit"
    await harness.store.release_probe(T, old)  # twice changes nothing either
    assert await harness.store.acquire_probe(T, 30.0) is None

    await harness.store.release_probe(T, new)
    assert await harness.store.acquire_probe(T, 30.0) is not None


async def test_store_probe_permit_does_not_touch_the_snapshot(harness: Harness) -> None:
    await harness.store.compare_and_set(T, 0, TRIPPED)
    token = await harness.store.acquire_probe(T, 30.0)
    assert token is not None
    await harness.store.release_probe(T, token)
    assert (await harness.store.load([T])).entries[T] == Versioned(1, TRIPPED)


async def test_store_renew_by_the_holder_outlives_the_first_ttl(harness: Harness) -> None:
    token = await harness.store.acquire_probe(T, harness.s * 0.2)
    assert token is not None
    assert await harness.store.renew_probe(T, token, 30.0) is True
    await harness.advance(harness.s * 0.3)  # past the first TTL
    assert await harness.store.acquire_probe(T, 30.0) is None, "the renewed permit expired on its first TTL"
    assert await harness.store.renew_probe(T, token, 30.0) is True, "the holder renews again"
    await harness.store.release_probe(T, token)
    assert await harness.store.acquire_probe(T, 30.0) is not None


async def test_store_renew_by_anyone_but_the_holder_fails_and_extends_nothing(harness: Harness) -> None:
    token = await harness.store.acquire_probe(T, harness.s * 0.2)
    assert token is not None
    for wrong in ["", "1", "wrong", token[:-1], token + "0"]:
        assert await harness.store.renew_probe(T, wrong, 30.0) is False, f"renewed by {wrong!r}"
    assert await harness.store.renew_probe(U, token, 30.0) is False, "the right token, for another target"
    assert await harness.store.acquire_probe(U, 30.0) is not None, "a failed renewal creates no permit"
    await harness.advance(harness.s * 0.3)
    assert await harness.store.acquire_probe(T, 30.0) is not None, "a wrong token's renewal extended the permit"


async def test_store_renew_of_an_expired_permit_fails(harness: Harness) -> None:
    old = await harness.store.acquire_probe(T, harness.s * 0.2)
    assert old is not None
    await harness.advance(harness.s * 0.3)
    assert await harness.store.renew_probe(T, old, 30.0) is False
    new = await harness.store.acquire_probe(T, 30.0)
    assert new is not None, "a failed renewal brought the expired permit back"
    assert await harness.store.renew_probe(T, old, 30.0) is False, "the old holder renews the new holder's permit"
    assert await harness.store.acquire_probe(T, 30.0) is None
    assert await harness.store.renew_probe(T, new, 30.0) is True


async def test_store_renew_of_a_released_permit_fails(harness: Harness) -> None:
    token = await harness.store.acquire_probe(T, 30.0)
    assert token is not None
    await harness.store.release_probe(T, token)
    assert await harness.store.renew_probe(T, token, 30.0) is False
    assert await harness.store.acquire_probe(T, 30.0) is not None


async def test_breakers_probe_that_outlived_its_permit_keeps_the_next_holders(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through `Breakers` on each store: probe A's process stalls (its permit is not
    renewed) and A outlives its permit; B takes a new one; A's late result releases
    nothing of B's."""
    monkeypatch.setattr(turnout.health.probes, "asyncio", StalledRenewals())
    # run_chance 0.5: one failure on a fresh target is already an unlikely run.
    settings = BreakerSettings(
        consecutive_failures=1,
        run_chance=0.5,
        cooldown_s=harness.s * 0.1,
        max_cooldown_s=harness.s * 0.1,
        probe_ttl_s=harness.s * 0.2,
    )
    breakers = Breakers.over(harness.store, settings, clock=harness.expected_now, rng=random.Random(3))
    view = await breakers.reads.view([T])
    await breakers.results.record(T, FailureKind.SERVER_ERROR, probe_token=None, error="trip", view=view)
    assert (await harness.store.load([T])).entries[T].snapshot.open
    await harness.advance(harness.s * 0.15)  # HALF_OPEN

    view_a = await breakers.reads.view([T])
    gate_a = await breakers.gate.admit(T, view_a)
    assert gate_a.admitted and gate_a.probe
    await harness.advance(harness.s * 0.25)  # A's permit expires while A still runs

    view_b = await breakers.reads.view([T])
    gate_b = await breakers.gate.admit(T, view_b)
    assert gate_b.admitted and gate_b.probe
    assert gate_b.probe_token != gate_a.probe_token

    await breakers.results.record(T, FailureKind.CANCELLED, probe_token=gate_a.probe_token, error="", view=view_a)
    assert await harness.store.acquire_probe(T, 30.0) is None, "the old probe freed the newer holder's permit"
    assert not (await breakers.gate.admit(T, await breakers.reads.view([T]))).admitted, "a second probe while B runs"

    await breakers.results.record(T, FailureKind.CANCELLED, probe_token=gate_b.probe_token, error="", view=view_b)
    assert await harness.store.acquire_probe(T, 30.0) is not None


# ------------------------------------------------------------------ Redis specifics


async def test_redis_store_unreadable_snapshot_reads_closed_at_its_version(redis_client: Redis) -> None:
    await cast(Awaitable[int], redis_client.hset(keys.breaker_key(T), mapping={"v": "4", "s": b"\xc1 not msgpack"}))
    store = RedisBreakerStore(redis_client)
    assert (await store.load([T])).entries[T] == Versioned(4, CLOSED)
    # ...and can be overwritten with the version it reads at.
    assert await store.compare_and_set(T, 4, TRIPPED) is None
    assert (await store.load([T])).entries[T] == Versioned(5, TRIPPED)


async def test_redis_store_snapshot_keys_expire_and_probe_keys_are_short_lived(redis_client: Redis) -> None:
    store = RedisBreakerStore(redis_client)
    await store.compare_and_set(T, 0, TRIPPED)
    assert 0 < await redis_client.ttl(keys.breaker_key(T)) <= 7 * 24 * 3600
    token = await store.acquire_probe(T, 0.5)
    assert token is not None
    assert await redis_client.get(keys.probe_key(T)) == token.encode()
    assert 0 < await redis_client.pttl(keys.probe_key(T)) <= 500


async def test_redis_store_renew_sets_the_permit_ttl_from_now_and_keeps_the_token(redis_client: Redis) -> None:
    store = RedisBreakerStore(redis_client)
    token = await store.acquire_probe(T, 0.5)
    assert token is not None
    assert await store.renew_probe(T, token, 30.0) is True
    assert 500 < await redis_client.pttl(keys.probe_key(T)) <= 30_000
    assert await redis_client.get(keys.probe_key(T)) == token.encode()
    assert await store.renew_probe(T, "wrong", 60.0) is False
    assert await redis_client.pttl(keys.probe_key(T)) <= 30_000


async def test_redis_store_fifty_processes_recording_concurrently_lose_no_failure(
    redis_url: str, redis_client: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """50 `Breakers`, each with its own client and store (50 processes), record 4
    failures each at once on one target: all 200 land, none given up on."""
    settings = BreakerSettings(window=1e7, consecutive_failures=10**6, failure_rate=2.0)
    clients = [Redis.from_url(redis_url) for _ in range(50)]
    try:
        fleet = [Breakers.over(RedisBreakerStore(c), settings) for c in clients]
        views = await asyncio.gather(*(b.reads.view([T]) for b in fleet for _ in range(4)))
        assert all(v.entries[T].version == 0 for v in views)
        with caplog.at_level(logging.ERROR, logger="turnout.breaker"):
            await asyncio.gather(
                *(
                    fleet[i // 4].results.record(
                        T, FailureKind.SERVER_ERROR, probe_token=None, error=f"e{i}", view=view
                    )
                    for i, view in enumerate(views)
                )
            )
    finally:
        await asyncio.gather(*(c.aclose() for c in clients))
    assert "not recorded" not in caplog.text
    entry = (await RedisBreakerStore(redis_client).load([T])).entries[T]
    assert 50 <= entry.version <= 200, "at least one write per process; one may carry several failures"
    successes, failures = counts(entry.snapshot, entry.snapshot.counted_at_s, settings)
    assert successes == 0.0 and failures == pytest.approx(200.0, rel=1e-4)
    assert entry.snapshot.run == 200
    assert not entry.snapshot.open and entry.snapshot.trips == 0


# ------------------------------------------------------------------ rolling measures (SPEC §10)


async def test_store_speeds_are_loaded_with_the_snapshots_and_follow_an_ewma(harness: Harness) -> None:
    assert (await harness.store.load([T, U])).speeds == {}
    await harness.store.record_speed(T, ttft_ms=400.0, tokens_per_s=50.0, alpha=0.25, ttl_s=60)
    await harness.store.record_speed(T, ttft_ms=800.0, tokens_per_s=None, alpha=0.25, ttl_s=60)
    loaded = await harness.store.load([T, U])
    assert set(loaded.speeds) == {T}
    assert loaded.speeds[T].ttft_ms == pytest.approx(400.0 + 0.25 * (800.0 - 400.0))
    assert loaded.speeds[T].tokens_per_s == pytest.approx(50.0)  # a None sample leaves it alone
    assert loaded.entries[T] == Versioned(0, CLOSED)  # measures never touch the snapshot


async def test_store_cas_folds_the_speed_sample_in_whatever_the_write_s_outcome(harness: Harness) -> None:
    """The measures ride with a compare-and-set (one round trip) and are folded once, stored or not."""
    await harness.store.record_speed(T, ttft_ms=400.0, tokens_per_s=50.0, alpha=0.25, ttl_s=60)
    sample = SpeedSample(ttft_ms=800.0, tokens_per_s=None, alpha=0.25, ttl_s=60)
    assert await harness.store.compare_and_set(T, 0, TRIPPED, sample) is None
    assert await harness.store.compare_and_set(T, 0, HEALTHY, sample) is not None  # lost: version moved on
    loaded = await harness.store.load([T])
    assert loaded.entries[T] == Versioned(1, TRIPPED)
    first = 400.0 + 0.25 * (800.0 - 400.0)
    assert loaded.speeds[T].ttft_ms == pytest.approx(first + 0.25 * (800.0 - first))
    assert loaded.speeds[T].tokens_per_s == pytest.approx(50.0)


async def test_store_speed_with_only_a_rate_leaves_latency_unmeasured(harness: Harness) -> None:
    await harness.store.record_speed(U, ttft_ms=None, tokens_per_s=12.5, alpha=0.2, ttl_s=60)
    speed = (await harness.store.load([U])).speeds[U]
    assert speed.ttft_ms is None and speed.tokens_per_s == pytest.approx(12.5)


async def test_redis_store_speeds_expire_after_their_ttl_and_load_in_one_round_trip(redis_client: Redis) -> None:
    store = RedisBreakerStore(redis_client)
    await store.record_speed(T, ttft_ms=10.0, tokens_per_s=1.0, alpha=0.2, ttl_s=30)
    assert 0 < await redis_client.ttl(keys.speed_key(T)) <= 30
    await redis_client.set(keys.speed_key(U) + "-unrelated", "x")
    await cast(Awaitable[int], redis_client.hset(keys.speed_key(U), mapping={"ttft_ms": "not a number"}))
    loaded = await store.load([T, U])
    assert loaded.speeds[U].ttft_ms is None and loaded.speeds[T].ttft_ms == pytest.approx(10.0)


async def test_store_plan_caps_are_loaded_with_the_snapshots_until_they_expire(harness: Harness) -> None:
    from turnout.state.breaker_store import cap_subject

    shared, org = cap_subject("shared", T), cap_subject("org:acme", T)
    assert (await harness.store.load([T], [shared, org])).caps == {}
    until = harness.expected_now() + 30.0
    await harness.store.set_plan_cap(shared, until_s=until, ttl_s=0.3)
    loaded = await harness.store.load([T], [shared, org])
    assert loaded.caps == {shared: pytest.approx(until)}
    assert (await harness.store.load([T])).caps == {}  # read only when asked
    await harness.advance(0.4)
    assert (await harness.store.load([T], [shared])).caps == {}


# ------------------------------------------------------------------ announcements (issue: Performance)


async def _announced(pubsub: Any, expected: int) -> list[bytes]:
    """The messages on the health channel: `expected` of them, then any more within 0.2 s."""
    got: list[bytes] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.2)
        if message is not None:
            got.append(message["data"])
        elif len(got) >= expected:
            break
    return got


async def test_redis_store_announces_a_stored_write_when_told_and_only_then(redis_client: Redis) -> None:
    store = RedisBreakerStore(redis_client)
    pubsub = redis_client.pubsub()
    await pubsub.subscribe(keys.HEALTH_CHANNEL)
    try:
        assert await store.compare_and_set(T, 0, TRIPPED, notify=True) is None
        assert await store.compare_and_set(T, 1, HEALTHY) is None
        assert await store.compare_and_set(T, 0, HEALTHY, notify=True) is not None  # refused: nothing changed
        await store.set_plan_cap("shared|" + U, until_s=1_900_000_000.0, ttl_s=60)
        assert await _announced(pubsub, 2) == [T.encode(), ("shared|" + U).encode()]
    finally:
        await pubsub.aclose()  # type: ignore[no-untyped-call]
