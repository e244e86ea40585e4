"""The slow-start rate counter of both breaker stores (`BreakerStore.take_ramp_slot`; SPEC §5):
memory on a fake clock, Redis on its own clock (the same cell rate as `turnout.core.ramp.rate_slot`)."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.breaker_store import MemoryBreakerStore, RedisBreakerStore

T = "acme/model-a"


async def test_memory_counter_spaces_calls_by_the_rate() -> None:
    now = [1_700_000_000.0]
    store = MemoryBreakerStore(lambda: now[0])
    assert await store.take_ramp_slot(T, 5.0) == 0.0
    wait = await store.take_ramp_slot(T, 5.0)
    assert abs(wait - 0.2) < 1e-6
    now[0] += wait
    assert await store.take_ramp_slot(T, 5.0) == 0.0
    assert await store.take_ramp_slot("other/model", 5.0) == 0.0, "targets are independent"


async def test_redis_counter_admits_the_rate_of_a_herd_from_many_clients(redis_client: Redis) -> None:
    """200 concurrent callers (as many processes would be) at 10 calls/s: one goes at once, the
    rest are told how long to wait; over ~0.55 s of retries the herd gets about 0.55 · 10 + 1."""
    store = RedisBreakerStore(redis_client)
    await redis_client.delete(keys.ramp_key(T))
    first = await asyncio.gather(*(store.take_ramp_slot(T, 10.0) for _ in range(200)))
    assert sum(w == 0.0 for w in first) == 1
    assert all(0.0 < w <= 0.1 for w in first if w)
    admitted, loop = 1, asyncio.get_running_loop()
    started = loop.time()
    while loop.time() - started < 0.55:
        waits = await asyncio.gather(*(store.take_ramp_slot(T, 10.0) for _ in range(20)))
        admitted += sum(w == 0.0 for w in waits)
        await asyncio.sleep(0.01)
    assert 4 <= admitted <= 8, admitted
    ttl = await redis_client.pttl(keys.ramp_key(T))
    assert 0 < ttl <= 1100, "the counter outlives its arrival time by a second, no more"
