"""The Redis limit script decides exactly as `turnout.core.limits.decide` (SPEC §10 limits).

Runs against the session's real `redis-server`; time is passed in (`now_ms`),
so nothing here sleeps.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from redis.asyncio import Redis

from support.admit_enqueue import admit_enqueue
from turnout.core.limits import Counters, Demand, Limits, ScopeLimits, decide
from turnout.state.lease_keeper import LeaseKeeper
from turnout.state.limit_store import LimitStore

T0 = 1_700_000_000_000

ORG = ScopeLimits(kind="org", org="acme", limits=Limits(rpm=20, tpm=3_000, max_concurrent=6))
SQUAD = ScopeLimits(kind="squad", org="acme", id="r&d:1", limits=Limits(tpm=2_000, max_streams=2))
KEY = ScopeLimits(kind="key", org="acme", id="bot", limits=Limits(rpm=7, max_concurrent=4, max_streams=1))


@pytest.mark.parametrize("composed", [False, True], ids=["alone", "in-the-enqueue"])
@pytest.mark.parametrize("seed", range(12))
async def test_limit_store_matches_the_pure_decision_on_random_sequences(
    redis_client: Redis, seed: int, composed: bool
) -> None:
    rng = random.Random(seed)
    store = LimitStore(redis_client, lease_ms=2_000)
    scopes = [ORG, SQUAD, KEY]
    counters = tuple(Counters() for _ in scopes)
    now = T0
    refused = admitted = 0
    for i in range(150):
        now += rng.choice([0, 0, 1, 50, 400, 3_000, 9_000])
        demand = Demand(tokens=rng.choice([0, 10, 120, 700, 2_500]), stream=rng.random() < 0.4, lease_ms=2_000)
        expected = decide(scopes, counters, demand, now)
        if composed:  # in the enqueue's own script: the job is queued exactly when admitted
            added, got = await admit_enqueue(redis_client, store.call(scopes, demand, f"r{i}", now_ms=now))
            assert added == (1 if expected.verdict.admitted else 2)
        else:
            got = await store.admit(scopes, demand, f"r{i}", now_ms=now)
        assert got is not None and got.verdict == expected.verdict, f"step {i}"
        counters = expected.counters
        refused += not got.verdict.admitted
        admitted += got.verdict.admitted
    assert refused and admitted


async def test_limit_store_release_frees_the_slot_and_renewal_keeps_it(redis_client: Redis) -> None:
    store = LimitStore(redis_client, lease_ms=1_000)
    scopes = [KEY]
    stream = Demand(tokens=0, stream=True, lease_ms=1_000)
    first = await store.admit(scopes, stream, "a", now_ms=T0)
    assert first.verdict.admitted and len(first.lease.sets) == 2
    assert not (await store.admit(scopes, stream, "b", now_ms=T0 + 10)).verdict.admitted
    await store.renew([first.lease], now_ms=T0 + 900)  # now lives until T0 + 1 900
    assert not (await store.admit(scopes, stream, "c", now_ms=T0 + 1_500)).verdict.admitted
    await store.release(first.lease)
    await store.renew([first.lease], now_ms=T0 + 1_600)  # a released lease is not brought back
    assert (await store.admit(scopes, stream, "d", now_ms=T0 + 1_600)).verdict.admitted


async def test_limit_store_dead_holder_frees_its_slot_when_the_lease_expires(redis_client: Redis) -> None:
    store = LimitStore(redis_client, lease_ms=1_000)
    plain = Demand(tokens=0, stream=False, lease_ms=1_000)
    scopes = [ScopeLimits(kind="key", org="o", id="k", limits=Limits(max_concurrent=1))]
    assert (await store.admit(scopes, plain, "dies", now_ms=T0)).verdict.admitted
    assert not (await store.admit(scopes, plain, "x", now_ms=T0 + 999)).verdict.admitted
    assert (await store.admit(scopes, plain, "y", now_ms=T0 + 1_000)).verdict.admitted


async def test_lease_keeper_release_is_idempotent_and_uses_redis_time(redis_client: Redis) -> None:
    store = LimitStore(redis_client, lease_ms=30_000)
    keeper = LeaseKeeper(store)
    keeper.start()
    scopes = [ScopeLimits(kind="key", org="o", id="k", limits=Limits(max_concurrent=1))]
    plain = Demand(tokens=0, stream=False, lease_ms=30_000)
    held = await store.admit(scopes, plain, "one")
    keeper.hold(held.lease)
    assert not (await store.admit(scopes, plain, "two")).verdict.admitted
    await keeper.release(held.lease)
    await keeper.release(held.lease)
    assert (await store.admit(scopes, plain, "three")).verdict.admitted
    await keeper.stop()


async def test_lease_keeper_renews_a_held_lease_past_its_first_expiry(redis_client: Redis) -> None:
    store = LimitStore(redis_client, lease_ms=1_500)  # renewed every 0.5 s
    keeper = LeaseKeeper(store)
    keeper.start()
    scopes = [ScopeLimits(kind="key", org="o", id="k", limits=Limits(max_concurrent=1))]
    plain = Demand(tokens=0, stream=False, lease_ms=1_500)
    try:
        held = await store.admit(scopes, plain, "long")
        keeper.hold(held.lease)
        await asyncio.sleep(3.0)  # twice the lease: alive only because it was renewed
        assert not (await store.admit(scopes, plain, "other")).verdict.admitted
        await keeper.release(held.lease)
        assert (await store.admit(scopes, plain, "after")).verdict.admitted
    finally:
        await keeper.stop()
