"""The ingress's own 504 (SPEC §7, issue #14 item 1): a job a worker holds past its deadline is
withdrawn and its run cancelled, as for a client that left. Real `redis-server`, injected clock."""

from __future__ import annotations

import asyncio
import time

import pytest
from redis.asyncio import Redis

from support.jobs import job_payload
from turnout.state import keys
from turnout.state.queue import JobQueue


async def test_a_held_job_past_its_deadline_is_withdrawn_and_cancelled(redis_client: Redis) -> None:
    now = [1_000.0]
    queue = JobQueue(
        redis_client,
        listen_redis=redis_client,
        ingress_id="t",
        max_depth=100,
        result_poll_s=0.01,
        grace_s=0.0,
        clock=lambda: now[0],
    )
    payload = job_payload("held-1", now[0] + 5)
    cancels = redis_client.pubsub()
    await cancels.subscribe(keys.CANCEL_CHANNEL)
    waiting = asyncio.create_task(queue.submit(payload))
    deadline = time.monotonic() + 10
    while not await redis_client.exists(keys.JOB_PREFIX + "held-1"):
        assert time.monotonic() < deadline, "the job was never enqueued"
        await asyncio.sleep(0.01)
    await redis_client.set(keys.IN_PROGRESS_PREFIX + "held-1", b"1")  # a worker holds it
    now[0] += 6  # past the deadline: the ingress gives up
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(waiting, 10)
    assert not await redis_client.exists(keys.JOB_PREFIX + "held-1")  # never re-run if that worker dies
    assert await redis_client.zscore(keys.QUEUE, "held-1") is None
    message = None
    while message is None or message["type"] != "message":
        message = await cancels.get_message(timeout=5)
        assert message is not None, "no cancel was published"
    assert message["data"] == b"held-1"
    await cancels.aclose()  # type: ignore[no-untyped-call]


async def test_a_message_on_an_extra_channel_is_handled_before_a_later_result(redis_client: Redis) -> None:
    """The ingress forgets its kept health reads on `keys.HEALTH_CHANNEL` before it hands out any
    result published after the announcement (one subscription: publish order)."""
    seen: list[str] = []
    queue = JobQueue(
        redis_client,
        listen_redis=redis_client,
        ingress_id="t2",
        max_depth=100,
        also={keys.HEALTH_CHANNEL: lambda data: seen.append("forgot " + data.decode())},
    )
    await queue.start()
    try:
        deadline = time.monotonic() + 10
        while await redis_client.publish(keys.HEALTH_CHANNEL, "ping") == 0:  # until the listener is subscribed
            assert time.monotonic() < deadline, "the listener never subscribed"
            await asyncio.sleep(0.01)
        await redis_client.publish(keys.HEALTH_CHANNEL, "acme/model-a")
        await redis_client.publish(keys.HEALTH_CHANNEL, "acme/model-b")
        while len(seen) < 3:
            assert time.monotonic() < deadline, "messages lost"
            await asyncio.sleep(0.01)
        assert seen == ["forgot ping", "forgot acme/model-a", "forgot acme/model-b"], "in publish order"
    finally:
        await queue.stop()


async def test_after_the_listener_lost_redis_the_extra_channels_handlers_hear_that_anything_may_have_changed(
    redis_client: Redis,
) -> None:
    seen: list[bytes] = []
    queue = JobQueue(
        redis_client, listen_redis=redis_client, ingress_id="t3", max_depth=100, also={keys.HEALTH_CHANNEL: seen.append}
    )
    await queue._subscribed(False)
    assert seen == []
    await queue._subscribed(True)  # subscribed again after a loss: announcements may have been missed
    assert seen == [b""]
