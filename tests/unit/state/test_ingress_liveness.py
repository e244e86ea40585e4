"""An ingress's liveness lease and a worker's view of it, on a real Redis (`turnout.state.jobs.liveness`)."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from turnout.core.liveness import BACK_GRACE_MS
from turnout.state import keys
from turnout.state.errors import StateUnavailable
from turnout.state.jobs.liveness import IngressLease, IngressWatch


async def test_a_renewed_ingress_is_there_and_one_whose_lease_ran_out_with_nobody_listening_is_gone(
    redis_client: Redis,
) -> None:
    alive, killed = keys.reply_channel("alive"), keys.reply_channel("killed")
    await IngressLease(redis_client, alive).renew()
    await IngressLease(redis_client, killed, lease_ms=1).renew()
    await asyncio.sleep(0.01)
    assert await IngressWatch(redis_client).refresh() == {killed}


async def test_an_ingress_past_its_lease_but_still_listening_is_there(redis_client: Redis, redis_url: str) -> None:
    lagging = keys.reply_channel("lagging")
    await IngressLease(redis_client, lagging, lease_ms=1).renew()
    listener = Redis.from_url(redis_url)
    pubsub = listener.pubsub()
    await pubsub.subscribe(lagging)
    try:
        await asyncio.sleep(0.01)
        assert await IngressWatch(redis_client).refresh() == frozenset()
    finally:
        await pubsub.aclose()
        await listener.aclose()


async def test_a_stopped_lease_ends_at_once_and_an_unknown_ingress_is_there(redis_client: Redis) -> None:
    lease = IngressLease(redis_client, keys.reply_channel("stopping"), every_s=0.01)
    lease.start()
    await asyncio.sleep(0.03)
    watch = IngressWatch(redis_client)
    assert await watch.refresh() == frozenset()
    await lease.stop()
    assert await watch.refresh() == {keys.reply_channel("stopping")}
    assert keys.reply_channel("never-seen") not in watch.gone


async def test_after_a_failed_read_no_ingress_is_gone_until_each_could_renew(redis_client: Redis) -> None:
    """A failover cut every process off Redis: the first reads after it see lapsed leases and nobody
    listening, yet no job is dropped until the ingresses had `BACK_GRACE_MS` to renew."""
    lapsed = keys.reply_channel("lapsed-in-the-failover")
    await IngressLease(redis_client, lapsed, lease_ms=1).renew()
    await asyncio.sleep(0.01)
    watch = IngressWatch(redis_client)
    read = watch._read

    async def out_of_reach(**_: object) -> None:
        raise RedisConnectionError("the primary is gone")

    watch._read = out_of_reach  # type: ignore[assignment]
    with pytest.raises(StateUnavailable):
        await watch.refresh()
    watch._read = read
    assert await watch.refresh() == frozenset(), "within the grace after Redis came back"
    watch._back_ms = (watch._last_ok_ms or 0) - BACK_GRACE_MS  # the grace has passed (Redis TIME, not ours)
    assert await watch.refresh() == {lapsed}
