"""The fleet's one prober lease in real Redis (`turnout.state.prober_lease`; issue #41 item 6)."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.prober_lease import ProberLease


async def test_one_worker_holds_the_lease_renews_it_and_another_takes_it_when_it_goes(redis_client: Redis) -> None:
    await redis_client.delete(keys.PROBER_KEY)
    a, b = ProberLease(redis_client, 0.3), ProberLease(redis_client, 0.3)
    assert await a.hold() and not await b.hold()
    for _ in range(3):  # renewed past its first TTL
        await asyncio.sleep(0.15)
        assert await a.hold() and not await b.hold()
    await b.release()  # not b's: nothing happens
    assert await a.hold()
    await a.release()
    assert await b.hold() and not await a.hold()
    await asyncio.sleep(0.45)  # b stops renewing (a stalled or dead worker): the lease frees itself
    assert await a.hold()
