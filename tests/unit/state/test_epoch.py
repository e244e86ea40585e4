"""Redis epochs (`turnout.state.epoch`): one token per Redis life, created once, seen again
after a restart that kept the data, a new one after a loss; and `follow` re-running the file's
one-time step (and the persistence re-check) only when the epoch moved."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from turnout.state import keys
from turnout.state.epoch import EpochTracker, read_epoch
from turnout.state.follow import follow
from turnout.state.persistence import Persistence, warn_unless_persistent


async def test_the_epoch_is_created_once_and_read_the_same_by_every_process(redis_client: Redis) -> None:
    first = await read_epoch(redis_client)
    assert await read_epoch(redis_client) == first and len(first) == 32


async def test_a_tracker_says_moved_only_after_redis_lost_its_data(redis_client: Redis) -> None:
    tracker, other = EpochTracker(), EpochTracker()
    assert not await tracker.moved(redis_client)  # nothing seen before
    assert not await tracker.moved(redis_client)  # same Redis
    await redis_client.flushdb()
    assert await other.moved(redis_client) is False  # a process starting now sees a Redis like any other
    assert await tracker.moved(redis_client)  # the one that knew the old epoch sees the new one
    assert not await tracker.moved(redis_client)


async def test_a_process_finding_the_epoch_another_rewrote_sees_it_moved(redis_client: Redis) -> None:
    tracker = EpochTracker()
    await tracker.moved(redis_client)
    await redis_client.set(keys.EPOCH, "another-life")
    assert await tracker.moved(redis_client)


async def test_a_redis_without_aof_is_named_in_a_warning(redis_client: Redis, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="turnout.persistence"):
        assert await warn_unless_persistent(redis_client) is Persistence.OFF  # the test server runs without AOF
    assert "runs without AOF" in caplog.text


class _Flaky:
    """`follow`'s listen client: its pub/sub drops the connection once, the commands go to Redis."""

    def __init__(self, redis: Redis, on_drop: Any) -> None:
        self._redis = redis
        self._on_drop = on_drop
        self.sessions = 0

    def pubsub(self, **kwargs: Any) -> Any:
        outer = self

        class PubSub:
            async def subscribe(self, *channels: str) -> None:
                outer.sessions += 1

            async def get_message(self, **kw: Any) -> None:
                if outer.sessions == 1:
                    await outer._on_drop()
                    raise RedisConnectionError("Connection reset by peer")
                await asyncio.Event().wait()

            async def aclose(self) -> None:
                return None

        return PubSub()

    def pipeline(self, **kwargs: Any) -> Any:
        return self._redis.pipeline(**kwargs)


@pytest.mark.parametrize("lost", [True, False], ids=["data-lost", "data-kept"])
async def test_follow_runs_the_one_time_step_again_only_on_a_new_epoch(redis_client: Redis, lost: bool) -> None:
    firsts, rechecks, refreshes = [], [], []

    async def drop() -> None:
        if lost:
            await redis_client.flushdb()

    async def first() -> None:
        firsts.append(1)

    async def recheck() -> None:
        rechecks.append(1)

    twice = asyncio.Event()

    async def refresh() -> None:
        refreshes.append(1)
        if len(refreshes) == 2:
            twice.set()

    async def no_wait(_: float) -> None:
        return None

    ready = asyncio.Event()
    task = asyncio.create_task(
        follow(
            _Flaky(redis_client, drop),  # type: ignore[arg-type]
            "ch",
            refresh=refresh,
            ready=ready,
            poll_s=60.0,
            what="test",
            first=first,
            sleep=no_wait,
            epoch=EpochTracker(),
            on_new_epoch=recheck,
        )
    )
    await asyncio.wait_for(twice.wait(), 30)  # a bound for a hung test only: the loop needs no time
    task.cancel()
    assert len(refreshes) == 2  # one per subscription
    assert (len(firsts), len(rechecks)) == ((2, 1) if lost else (1, 0))
