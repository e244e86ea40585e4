"""A job the previous version queued (arq's keys) is adopted into the `{jobs}` queue and claimed there.

The old layout is written here as the previous version's ingress wrote it: arq's envelope
(`arq.jobs.serialize_job`), `arq:job:<id>` with the client's time left, `arq:queue` scored by
Redis `TIME`, the org's fair queue, the fair ring and a doorbell entry.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import cast

from arq.jobs import serialize_job
from redis.asyncio import Redis

from support.jobs import job_payload
from turnout.state import keys
from turnout.state.jobs import LegacyJobs, PickupStore, job_serializer, read_job
from turnout.wire import payload_encoder


async def _old_enqueue(redis: Redis, job_id: str, *, life_ms: int = 30_000) -> bytes:
    envelope = serialize_job(
        "chat_completion",
        (payload_encoder.encode(job_payload(job_id, time.time() + 30)),),
        {},
        None,
        int(time.time() * 1000),
        serializer=job_serializer,
    )
    now_ms = int(time.time() * 1000)
    await redis.psetex(keys.LEGACY_JOB_PREFIX + job_id, life_ms, envelope)
    await redis.zadd(keys.LEGACY_QUEUE, {job_id: now_ms})
    await redis.zadd(keys.LEGACY_FAIR_ORG_PREFIX + "acme", {job_id: now_ms})
    await cast(Awaitable[int], redis.rpush(keys.LEGACY_FAIR_RING, "acme"))
    await cast(Awaitable[int], redis.rpush(keys.LEGACY_DOORBELL, "1"))
    return envelope


async def test_an_unheld_old_job_moves_whole_and_is_claimed_as_a_requeued_one(redis_client: Redis) -> None:
    envelope = await _old_enqueue(redis_client, "old-1")
    await redis_client.set(keys.LEGACY_RETRY_PREFIX + "old-1", 1)  # an old worker ran it once, then died
    score = await redis_client.zscore(keys.LEGACY_QUEUE, "old-1")
    assert await LegacyJobs(redis_client).adopt() == (1, 0)
    assert await redis_client.get(keys.JOB_PREFIX + "old-1") == envelope
    assert 0 < await redis_client.pttl(keys.JOB_PREFIX + "old-1") <= 30_000  # the client's time left, kept
    assert await redis_client.zscore(keys.QUEUE, "old-1") == score  # its place: enqueued then, on Redis's clock
    assert await redis_client.exists(keys.LEGACY_QUEUE, keys.LEGACY_JOB_PREFIX + "old-1") == 0
    # the old queue is empty: its fair ring, fair queues and doorbell go with it
    assert await redis_client.exists(keys.LEGACY_FAIR_RING, keys.LEGACY_DOORBELL) == 0
    assert await redis_client.exists(keys.LEGACY_FAIR_ORG_PREFIX + "acme") == 0

    store = PickupStore(redis_client, keys.QUEUE, lease_s=10)
    assert await store.due(100) == ["old-1"]
    _, (claimed,) = await store.claim(["old-1"])
    assert claimed.job_try == 2  # its try counter came along: this is its re-run
    assert claimed.job is not None and read_job(claimed.job).function == "chat_completion"


async def test_a_job_an_old_worker_holds_is_left_to_it_and_the_old_layout_stays(redis_client: Redis) -> None:
    await _old_enqueue(redis_client, "held")
    await _old_enqueue(redis_client, "free")
    await redis_client.set(keys.LEGACY_IN_PROGRESS_PREFIX + "held", b"1")
    assert await LegacyJobs(redis_client).adopt() == (1, 1)
    assert await redis_client.zscore(keys.LEGACY_QUEUE, "held") is not None
    assert await redis_client.exists(keys.LEGACY_JOB_PREFIX + "held", keys.LEGACY_FAIR_RING) == 2
    assert await redis_client.zcard(keys.QUEUE) == 1


async def test_an_expired_old_job_is_dropped_not_moved(redis_client: Redis) -> None:
    await _old_enqueue(redis_client, "gone")
    await redis_client.delete(keys.LEGACY_JOB_PREFIX + "gone")  # its deadline passed
    assert await LegacyJobs(redis_client).adopt() == (0, 0)
    assert await redis_client.zcard(keys.QUEUE) == 0
    assert await redis_client.exists(keys.LEGACY_QUEUE) == 0


async def test_nothing_to_adopt_costs_one_script_and_moves_nothing(redis_client: Redis) -> None:
    assert await LegacyJobs(redis_client).adopt() == (0, 0)
    assert await redis_client.dbsize() == 0
