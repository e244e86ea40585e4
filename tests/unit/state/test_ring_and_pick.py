"""`PickupStore.ring_and_pick`: the doorbell's wait and the fair pick in one round trip.

Against the session's real `redis-server`: jobs are enqueued by the ingress's own
script (`JobQueue`, one doorbell entry each); the worker's side takes an entry
into its own list (`BLMOVE`) and `_PICK` counts and deletes it in the same
pipeline, so the doorbell keeps one entry per waiting job.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import cast

from redis.asyncio import Redis

from support.jobs import job_payload
from turnout.state import keys
from turnout.state.pickup_store import PickupStore
from turnout.state.queue import JobQueue

TAKEN = keys.doorbell_taken_key("worker-1")


async def _enqueue(redis: Redis, *job_ids: str, org: str = "org-r") -> None:
    queue = JobQueue(redis, listen_redis=redis, ingress_id="t", max_depth=1000)
    for job_id in job_ids:
        await queue._push(job_payload(job_id, time.time() + 60, org=org))


async def _doorbell(redis: Redis) -> int:
    return await cast(Awaitable[int], redis.llen(keys.DOORBELL))


async def test_a_ring_is_taken_and_its_job_picked_in_the_same_round_trip(redis_client: Redis) -> None:
    await _enqueue(redis_client, "r0")
    store = PickupStore(redis_client, keys.QUEUE, lease_s=10)
    now_ms, picked = await store.ring_and_pick(TAKEN, 1, free=4)
    assert [p.job_id for p in picked] == ["r0"] and picked[0].job is not None and picked[0].job_try == 1
    assert abs(now_ms - time.time() * 1000) < 60_000  # Redis TIME, epoch ms
    assert await redis_client.exists(keys.IN_PROGRESS_PREFIX + "r0") == 1
    assert (await _doorbell(redis_client), await redis_client.exists(TAKEN)) == (0, 0)


async def test_one_ring_fills_the_free_slots_and_leaves_one_entry_per_job_still_waiting(redis_client: Redis) -> None:
    await _enqueue(redis_client, "s0", "s1", "s2", "s3", "s4")
    store = PickupStore(redis_client, keys.QUEUE, lease_s=10)
    _, picked = await store.ring_and_pick(TAKEN, 1, free=2)
    assert [p.job_id for p in picked] == ["s0", "s1"]
    assert (await _doorbell(redis_client), await redis_client.exists(TAKEN)) == (3, 0)
    _, picked = await store.ring_and_pick(TAKEN, 1, free=9)
    assert [p.job_id for p in picked] == ["s2", "s3", "s4"]
    assert (await _doorbell(redis_client), await redis_client.exists(TAKEN)) == (0, 0)


async def test_a_ring_taken_with_no_job_left_to_claim_goes_back(redis_client: Redis) -> None:
    """The ring's job is not due yet (scored in the future): the entry goes back for a later pick."""
    await _enqueue(redis_client, "f0")
    await redis_client.zadd(keys.QUEUE, {"f0": time.time() * 1000 + 60_000})
    store = PickupStore(redis_client, keys.QUEUE, lease_s=10)
    _, picked = await store.ring_and_pick(TAKEN, 1, free=1)
    assert picked == []
    assert (await _doorbell(redis_client), await redis_client.exists(TAKEN)) == (1, 0)


async def test_a_wait_that_times_out_still_picks_a_job_that_has_no_ring(redis_client: Redis) -> None:
    await _enqueue(redis_client, "n0")
    await redis_client.delete(keys.DOORBELL)  # its ring was lost
    store = PickupStore(redis_client, keys.QUEUE, lease_s=10)
    _, picked = await store.ring_and_pick(TAKEN, 1, free=1)
    assert [p.job_id for p in picked] == ["n0"]
    assert (await _doorbell(redis_client), await redis_client.exists(TAKEN)) == (0, 0)


async def test_a_blocked_wait_wakes_on_the_ring_of_a_job_enqueued_meanwhile(
    redis_client: Redis, redis_url: str
) -> None:
    waiter = Redis.from_url(redis_url)  # the block holds its connection; the enqueue uses another
    try:
        store = PickupStore(waiter, keys.QUEUE, lease_s=10)
        waiting = asyncio.ensure_future(store.ring_and_pick(TAKEN, 30, free=1))
        while not any(c.get("cmd") == "blmove" for c in await redis_client.client_list(_type="normal")):
            await asyncio.sleep(0.01)  # until the block is in place: the ring must wake it, not find it there
        await _enqueue(redis_client, "w0")
        _, picked = await asyncio.wait_for(waiting, 20)  # woken by the ring, long before its 30 s block ends
        assert [p.job_id for p in picked] == ["w0"]
        assert (await _doorbell(redis_client), await redis_client.exists(TAKEN)) == (0, 0)
    finally:
        await waiter.aclose()


async def test_a_pick_script_redis_lost_is_loaded_and_still_counts_the_taken_ring(redis_client: Redis) -> None:
    await _enqueue(redis_client, "l0", "l1")
    store = PickupStore(redis_client, keys.QUEUE, lease_s=10)
    await redis_client.script_flush()
    _, picked = await store.ring_and_pick(TAKEN, 1, free=1)
    assert [p.job_id for p in picked] == ["l0"]
    assert (await _doorbell(redis_client), await redis_client.exists(TAKEN)) == (1, 0)  # l1's ring stays
