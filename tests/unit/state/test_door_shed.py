"""Shedding at the door (issue #14 item 5) against a real `redis-server`: the enqueue script's
count of jobs ahead, its decision, and the fleet heartbeats the estimate comes from."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import cast

import pytest
from redis.asyncio import Redis

from support.jobs import job_payload
from turnout.core.queue_wait import HEADROOM, FleetCapacity, jobs_ahead
from turnout.errors import GatewayUnavailable
from turnout.state import keys
from turnout.state.fleet import FleetBeat, FleetWatch, read_capacity
from turnout.state.queue import JobQueue
from turnout.wire import JobPayload


class FixedFleet(FleetWatch):
    """A fleet view with a set capacity (no Redis read)."""

    def __init__(self, capacity: FleetCapacity | None) -> None:
        self.capacity = capacity


def _payload(job_id: str, org: str, budget_s: float) -> JobPayload:
    return job_payload(job_id, time.time() + budget_s, org=org)


def _queue(redis: Redis, capacity: FleetCapacity | None) -> JobQueue:
    return JobQueue(redis, listen_redis=redis, ingress_id="t", max_depth=10_000, fleet=FixedFleet(capacity))


async def _fill(redis: Redis, backlog: dict[str, int]) -> None:
    unlimited = _queue(redis, None)
    for org, count in backlog.items():
        for i in range(count):
            await unlimited._push(_payload(f"{org}-{i}", org, 60))


@pytest.mark.parametrize(
    "backlog",
    [
        {},
        {"a": 3},
        {"b": 7},
        {"a": 2, "b": 9, "c": 1},
        {"b": 1, "c": 40},
    ],
)
async def test_the_script_counts_jobs_ahead_like_the_core(redis_client: Redis, backlog: dict[str, int]) -> None:
    await _fill(redis_client, backlog)
    expected = jobs_ahead(backlog.get("a", 0), [n for org, n in backlog.items() if org != "a"])
    # 1 s per job on one slot: `expected` jobs ahead, then its own, fit in 90 % of the budget
    capacity = FleetCapacity(slots=1, service_ms=1000)
    boundary_s = (expected + 1) / (1 - HEADROOM)
    await _queue(redis_client, capacity)._push(_payload("fits", "a", boundary_s + 0.2))
    if expected > 0:
        with pytest.raises(GatewayUnavailable) as shed:
            await _queue(redis_client, capacity)._push(_payload("late", "a", boundary_s - 0.2))
        assert shed.value.code == "queue_full"
        assert shed.value.retry_after_s >= 1


async def test_a_shed_job_leaves_nothing_behind_and_others_are_still_admitted(redis_client: Redis) -> None:
    await _fill(redis_client, {"a": 10})
    door = _queue(redis_client, FleetCapacity(slots=2, service_ms=1000))  # 10 ahead: a 5 s wait
    with pytest.raises(GatewayUnavailable) as shed:
        await door._push(_payload("short", "a", 2))
    assert (shed.value.code, shed.value.retry_after_s) == ("queue_full", 5)  # 5 s wait + 1 s - 90 % of ~2 s, rounded up
    assert await redis_client.exists(keys.JOB_PREFIX + "short") == 0
    assert await redis_client.zscore(keys.QUEUE, "short") is None
    assert await cast(Awaitable[int], redis_client.llen(keys.DOORBELL)) == 10
    await door._push(_payload("long", "a", 30))  # its budget covers the wait
    await door._push(_payload("other-org", "b", 2))  # a new org is one job per org from the head
    assert await redis_client.zcard(keys.QUEUE) == 12


async def test_an_empty_queue_is_never_shed_even_with_a_tiny_budget(redis_client: Redis) -> None:
    await _queue(redis_client, FleetCapacity(slots=1, service_ms=60_000))._push(_payload("x", "a", 0.01))
    assert await redis_client.zcard(keys.QUEUE) == 1


async def test_heartbeats_make_the_fleet_capacity_and_leave_on_stop(redis_client: Redis) -> None:
    assert await read_capacity(redis_client) is None
    idle = FleetBeat(redis_client, "w-idle", 3, lambda: 0.0)
    busy = FleetBeat(redis_client, "w-busy", 5, lambda: 800.0)
    await idle.beat()
    assert await read_capacity(redis_client) is None  # no job served yet: nothing to estimate from
    await busy.beat()
    assert await read_capacity(redis_client) == FleetCapacity(slots=8, service_ms=800.0)
    await busy.leave()
    assert await read_capacity(redis_client) is None
    watch = FleetWatch(redis_client)
    await FleetBeat(redis_client, "w-2", 2, lambda: 100.0).beat()
    await watch.refresh()
    assert watch.capacity == FleetCapacity(slots=5, service_ms=100.0)


async def test_a_stale_heartbeat_does_not_count(redis_client: Redis) -> None:
    await cast(Awaitable[int], redis_client.hset(keys.FLEET_WORKERS, mapping={"gone": "50:10:1000", "bad": "x"}))
    assert await read_capacity(redis_client) is None
    assert (
        await cast(Awaitable[list[bytes]], redis_client.hkeys(keys.FLEET_WORKERS)) == []
    )  # long-expired and malformed beats are removed
