"""`PickupStore.deliver` (issue: Performance): answers that finish while a delivery is in flight go
together in one pipelined round trip, each stored, published and its arq keys removed as alone; a
script Redis lost is loaded again; a caller that stops waiting does not withdraw its answer.
Real `redis-server`."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from redis.asyncio import Redis

from support.redis_trips import CountingRedis
from turnout.state import keys
from turnout.state.pickup_store import PickupStore


async def _queued_job(redis: Redis, job_id: str) -> None:
    await redis.set(keys.JOB_PREFIX + job_id, b"job")
    await redis.set(keys.IN_PROGRESS_PREFIX + job_id, b"1")
    await redis.zadd(keys.QUEUE, {job_id: 1})


async def _published(pubsub: Any, count: int) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + 10
    while len(got) < count and time.monotonic() < deadline:
        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.2)
        if message is not None:
            got.append(message["data"])
    return got


async def test_answers_delivered_together_are_each_stored_published_and_finished(
    redis_url: str, redis_client: Redis
) -> None:
    client = CountingRedis.from_url(redis_url)
    store = PickupStore(client, keys.QUEUE, lease_s=10)
    pubsub = redis_client.pubsub()
    await pubsub.subscribe("reply")
    try:
        for i in range(10):
            await _queued_job(redis_client, f"j{i}")
        await store.deliver("j0", "reply", b"answer-0", 60)  # loads the script
        CountingRedis.trips = 0
        await asyncio.gather(*(store.deliver(f"j{i}", "reply", f"answer-{i}".encode(), 60) for i in range(1, 10)))
        assert CountingRedis.trips == 1, "the nine answers that finished together went in one round trip"
        assert sorted(await _published(pubsub, 10)) == sorted(f"answer-{i}".encode() for i in range(10))
        for i in range(10):
            assert await redis_client.get(keys.result_key(f"j{i}")) == f"answer-{i}".encode()
            assert 0 < await redis_client.ttl(keys.result_key(f"j{i}")) <= 60
            assert not await redis_client.exists(keys.JOB_PREFIX + f"j{i}", keys.IN_PROGRESS_PREFIX + f"j{i}")
        assert await redis_client.zcard(keys.QUEUE) == 0
    finally:
        await pubsub.aclose()  # type: ignore[no-untyped-call]
        await client.aclose()


async def test_a_batch_after_redis_lost_its_scripts_is_still_delivered(redis_url: str, redis_client: Redis) -> None:
    client = Redis.from_url(redis_url)
    store = PickupStore(client, keys.QUEUE, lease_s=10)
    try:
        await _queued_job(redis_client, "k0")
        await store.deliver("k0", "reply", b"a", 60)
        await redis_client.script_flush()
        for i in range(1, 4):
            await _queued_job(redis_client, f"k{i}")
        await asyncio.gather(*(store.deliver(f"k{i}", "reply", b"a", 60) for i in range(1, 4)))
        assert all([await redis_client.exists(keys.result_key(f"k{i}")) for i in range(4)])
    finally:
        await client.aclose()


async def test_a_caller_cancelled_while_its_answer_is_delivered_does_not_withdraw_it(
    redis_url: str, redis_client: Redis
) -> None:
    client = Redis.from_url(redis_url)
    store = PickupStore(client, keys.QUEUE, lease_s=10)
    try:
        await _queued_job(redis_client, "c1")
        delivering = asyncio.create_task(store.deliver("c1", "reply", b"kept", 60))
        await asyncio.sleep(0)
        delivering.cancel()
        await asyncio.wait([delivering])
        deadline = time.monotonic() + 10
        while not await redis_client.exists(keys.result_key("c1")):
            assert time.monotonic() < deadline, "the answer was withdrawn with its caller"
            await asyncio.sleep(0.01)
    finally:
        await client.aclose()
