"""Fair pickup across orgs (SPEC §10): the enqueue script's fair queues and the worker's pick script.

Against the session's real `redis-server`: jobs are enqueued by the
ingress's own script (`JobQueue`), picked by the worker's `_PICK`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Any, cast

from redis.asyncio import Redis

from support.jobs import job_payload
from turnout.state import keys
from turnout.state.pickup_store import _PICK
from turnout.state.queue import JobQueue


async def _enqueue(queue: JobQueue, job_id: str, org: str) -> None:
    payload = job_payload(job_id, time.time() + 60, org=org)
    await queue._push(payload)


async def _pick_raw(redis: Redis, free: int, rung: int = 0) -> list[Any]:
    script = redis.register_script(_PICK)
    raw: list[Any] = await script(
        keys=[keys.FAIR_RING, keys.QUEUE, keys.DOORBELL],
        args=[free, 10_000, keys.IN_PROGRESS_PREFIX, keys.FAIR_ORG_PREFIX, rung, keys.RETRY_PREFIX, keys.JOB_PREFIX],
    )
    return raw


async def _pick(redis: Redis, free: int, rung: int = 0) -> list[str]:
    raw = await _pick_raw(redis, free, rung)
    return [j.decode() for j in raw[1::4]]


async def test_fair_pick_takes_orgs_round_robin_whatever_their_backlog(redis_client: Redis) -> None:
    queue = JobQueue(redis_client, listen_redis=redis_client, ingress_id="t", max_depth=1000)
    for i in range(50):  # ids sort as enqueued: jobs of one millisecond are taken in id order
        await _enqueue(queue, f"a{i:02d}", "org-a")
    await _enqueue(queue, "b0", "org-b")
    await _enqueue(queue, "c0", "org-c")
    await _enqueue(queue, "b1", "org-b")
    assert await _pick(redis_client, 1) == ["a00"]
    assert await _pick(redis_client, 1) == ["b0"]
    assert await _pick(redis_client, 1) == ["c0"]
    assert await _pick(redis_client, 4) == ["a01", "b1", "a02", "a03"]
    assert await redis_client.exists(keys.IN_PROGRESS_PREFIX + "b1") == 1
    assert await redis_client.zcard(keys.QUEUE) == 53  # claimed jobs stay in arq's queue until delivered
    assert await cast(Awaitable[list[bytes]], redis_client.lrange(keys.FAIR_RING, 0, -1)) == [b"org-a"]


async def test_fair_pick_drops_entries_of_jobs_gone_or_running_elsewhere(redis_client: Redis) -> None:
    queue = JobQueue(redis_client, listen_redis=redis_client, ingress_id="t", max_depth=1000)
    for job_id in ("x0", "x1", "x2"):
        await _enqueue(queue, job_id, "org-x")
    await redis_client.zrem(keys.QUEUE, "x0")  # withdrawn at its deadline
    await redis_client.set(keys.IN_PROGRESS_PREFIX + "x1", "1")  # claimed by a scan elsewhere
    assert await _pick(redis_client, 5) == ["x2"]
    assert await redis_client.exists(keys.FAIR_RING, keys.fair_org_key("org-x")) == 0
    await _enqueue(queue, "x3", "org-x")  # an emptied org comes back on the ring
    assert await _pick(redis_client, 5) == ["x3"]


async def test_fair_pick_returns_what_arqs_run_job_opens_with(redis_client: Redis) -> None:
    """The claim reads the job's bytes and counts its try (arq's retry key, arq's expiry) in the same
    round trip, and returns Redis's clock, so the job starts with no further read."""
    queue = JobQueue(redis_client, listen_redis=redis_client, ingress_id="t", max_depth=1000)
    await _enqueue(queue, "j0", "org-j")
    stored = await redis_client.get(keys.JOB_PREFIX + "j0")
    now_ms, job_id, score, job, job_try = await _pick_raw(redis_client, 1)
    seconds, _ = await redis_client.time()
    assert (job_id, job, job_try) == (b"j0", stored, 1)
    assert abs(int(now_ms) - seconds * 1000) < 2000
    assert float(score) <= int(now_ms)
    assert await redis_client.get(keys.RETRY_PREFIX + "j0") == b"1"
    assert 0 < await redis_client.ttl(keys.RETRY_PREFIX + "j0") <= 88400


async def test_the_doorbell_holds_one_entry_per_waiting_job(redis_client: Redis) -> None:
    queue = JobQueue(redis_client, listen_redis=redis_client, ingress_id="t", max_depth=1000)
    for i in range(5):
        await _enqueue(queue, f"d{i}", "org-d")
    assert await cast(Awaitable[int], redis_client.llen(keys.DOORBELL)) == 5  # one ring per job, for one worker each
    await cast(Awaitable[bytes], redis_client.lpop(keys.DOORBELL))  # a worker woke on one ring...
    assert await _pick(redis_client, 2, rung=1) == ["d0", "d1"]  # ...and filled two slots
    assert await cast(Awaitable[int], redis_client.llen(keys.DOORBELL)) == 3  # the second job's ring is gone too
    assert await _pick(redis_client, 1) == ["d2"]  # a job end's pick, no ring popped
    assert await cast(Awaitable[int], redis_client.llen(keys.DOORBELL)) == 2
    assert await _pick(redis_client, 9) == ["d3", "d4"]  # nothing waits any more: no ring left
    assert await redis_client.exists(keys.DOORBELL) == 0


async def test_doorbell_entries_popped_beyond_the_free_slots_go_back(redis_client: Redis) -> None:
    queue = JobQueue(redis_client, listen_redis=redis_client, ingress_id="t", max_depth=1000)
    for i in range(4):
        await _enqueue(queue, f"e{i}", "org-e")
    await cast(
        Awaitable[list[bytes]], redis_client.lpop(keys.DOORBELL, 3)
    )  # a worker popped three rings but has one free slot
    assert await _pick(redis_client, 1, rung=3) == ["e0"]
    assert (
        await cast(Awaitable[int], redis_client.llen(keys.DOORBELL)) == 3
    )  # the two unanswered rings are back: one per waiting job
