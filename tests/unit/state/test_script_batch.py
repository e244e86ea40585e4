"""`ScriptBatch` (issue: Performance, Redis work per request): calls made together share one round trip,
each still its own script run with its own reply or error; a caller that stopped waiting before its
batch left is not sent unless the batch sends abandoned calls; a script Redis lost is loaded again.
Real `redis-server`."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from support.redis_trips import CountingRedis
from turnout.state.script_batch import ScriptBatch

# KEYS: a counter   ARGV: a word ('bad': an error reply)   Returns the word, after counting the call
ECHO = """
if ARGV[1] == 'bad' then return redis.error_reply('bad word') end
redis.call('incr', KEYS[1])
return ARGV[1]
"""


@pytest.fixture
async def counting(redis_url: str, redis_client: Redis) -> Any:
    client = CountingRedis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


def _batch(client: Redis, *, send_abandoned: bool = False) -> ScriptBatch:
    return ScriptBatch(client, client.register_script(ECHO), name="test-batch", send_abandoned=send_abandoned)


async def test_calls_made_together_share_one_round_trip_and_each_gets_its_own_reply(
    counting: Redis, redis_client: Redis
) -> None:
    batch = _batch(counting)
    assert await batch(["n"], ["first"]) == b"first"  # alone: loads the script
    CountingRedis.trips = 0
    replies = await asyncio.gather(*(batch(["n"], [f"w{i}"]) for i in range(20)))
    assert replies == [f"w{i}".encode() for i in range(20)]
    assert CountingRedis.trips == 1
    assert await redis_client.get("n") == b"21"


async def test_a_failing_call_fails_only_its_caller(counting: Redis, redis_client: Redis) -> None:
    batch = _batch(counting)
    await batch(["n"], ["load"])
    results = await asyncio.gather(
        batch(["n"], ["a"]), batch(["n"], ["bad"]), batch(["n"], ["b"]), return_exceptions=True
    )
    assert results[0] == b"a" and results[2] == b"b"
    assert isinstance(results[1], ResponseError) and "bad word" in str(results[1])
    assert await redis_client.get("n") == b"3"


async def test_calls_made_while_a_batch_is_in_flight_go_in_the_next_one(counting: Redis) -> None:
    batch = _batch(counting)
    await batch(["n"], ["load"])
    CountingRedis.trips = 0
    first = asyncio.ensure_future(batch(["n"], ["x"]))
    await asyncio.sleep(0)  # the first call is on its way (its batch's task started)
    later = [asyncio.ensure_future(batch(["n"], [f"y{i}"])) for i in range(5)]
    assert await first == b"x"
    assert [await call for call in later] == [f"y{i}".encode() for i in range(5)]
    assert CountingRedis.trips == 2  # the first alone, the five together


@pytest.mark.parametrize("send_abandoned", [False, True])
async def test_a_caller_that_stops_waiting_before_its_batch_leaves_is_sent_only_when_asked(
    counting: Redis, redis_client: Redis, send_abandoned: bool
) -> None:
    batch = _batch(counting, send_abandoned=send_abandoned)
    await batch(["warm"], ["load"])
    kept = asyncio.ensure_future(batch(["n"], ["kept"]))
    left = asyncio.ensure_future(batch(["n"], ["left"]))
    await asyncio.sleep(0)  # both calls waiting; their batch not yet sent
    left.cancel()
    assert await kept == b"kept"
    with pytest.raises(asyncio.CancelledError):
        await left
    await asyncio.sleep(0.05)
    assert await redis_client.get("n") == (b"2" if send_abandoned else b"1")


async def test_a_script_redis_lost_is_loaded_again_and_every_call_runs(counting: Redis, redis_client: Redis) -> None:
    batch = _batch(counting)
    await batch(["n"], ["load"])
    await redis_client.script_flush()
    replies = await asyncio.gather(*(batch(["n"], [f"w{i}"]) for i in range(4)))
    assert replies == [f"w{i}".encode() for i in range(4)]
    assert await redis_client.get("n") == b"5"


async def test_redis_unreachable_fails_every_caller_of_the_batch() -> None:
    client = Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    batch = _batch(client)
    try:
        results = await asyncio.gather(*(batch(["n"], [f"w{i}"]) for i in range(3)), return_exceptions=True)
    finally:
        await client.aclose()
    assert all(isinstance(r, Exception) and not isinstance(r, asyncio.CancelledError) for r in results)
