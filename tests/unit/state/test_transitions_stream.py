"""The breaker transitions stream and its writer, on a real redis-server: bounded by length and age,
read by time; only a target's standing changes are written, in the background."""

from __future__ import annotations

import time

import msgspec
from redis.asyncio import Redis

from turnout.core.breaker import BreakerSnapshot
from turnout.observability.breaker_log import BreakerLog
from turnout.state import keys, transitions_stream


async def test_the_stream_is_bounded_by_length_and_by_age(redis_client: Redis) -> None:
    now = time.time()
    await transitions_stream.append(redis_client, [b"x"] * 1000, now_s=now, max_len=100)
    assert await redis_client.xlen(keys.BREAKER_TRANSITIONS_STREAM) < 300  # `~`: whole nodes, about 100 kept
    assert (await transitions_stream.read_since(redis_client, now - 5))[-1] == b"x"
    assert await transitions_stream.read_since(redis_client, now + 60) == []
    await transitions_stream.append(redis_client, [b"y"], now_s=now + 10_000, keep_s=60)
    assert await redis_client.xlen(keys.BREAKER_TRANSITIONS_STREAM) <= 101  # every full node aged out


async def test_the_log_writes_a_targets_transitions_and_nothing_else(redis_client: Redis) -> None:
    log = BreakerLog(redis_client, wall=time.time)
    now = time.time()
    opened = BreakerSnapshot(open=True, trips=1, opened_at_s=now, cooldown_s=5, trip_rule="run", last_error="503: x")
    log.step("sim-a/m", BreakerSnapshot(), opened, now)
    log.step("sim-a/m", BreakerSnapshot(), BreakerSnapshot(run=1, failures=1.0), now)  # no standing moved
    log.step("credential:acme:sim-a", BreakerSnapshot(), opened, now)  # an org's own key: not a fleet fact
    log.step("sim-a/m", opened, BreakerSnapshot(closed_at_s=now + 6), now + 6)
    await log.drain()
    events = [msgspec.json.decode(raw) for raw in await transitions_stream.read_since(redis_client, now - 60)]
    assert [(e["target"], e["event"]) for e in events] == [("sim-a/m", "opened"), ("sim-a/m", "closed")]
    assert events[0]["cooldown_s"] == 5 and events[0]["error"] == "503: x"
