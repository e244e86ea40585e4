"""Concurrent counted failures from four real workers: none is lost (SPEC §5)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import msgspec
import pytest
import redis

from support.gateway import Gateway, start_gateway
from support.procs import Fleet, require_redis
from turnout.core.breaker import BreakerSnapshot

pytestmark = pytest.mark.integration

KEY = "tk-test-counting-00000001"
CONFIG = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
models:
  counted: {{offers: [{{provider: sim-a, model: "cnt~500"}}]}}
policy:
  retry: {{max_retries: 0}}
breaker: {{consecutive_failures: 1000000, sole_consecutive_failures: 1000000, window: 36000, failure_rate: 2.0,
          sole_failure_rate: 2.0}}
orgs:
  acme:
    keys: [{{name: main, key: {key}}}]
"""


@pytest.fixture(scope="module")
def fleet4() -> Iterator[Gateway]:
    """Four workers whose breakers never trip, so every failure is attempted and counted."""
    require_redis()
    fleet = Fleet()
    try:
        yield start_gateway(fleet, CONFIG, workers=4, key=KEY)
    finally:
        fleet.stop_all()


async def _burst(gw: Gateway, count: int) -> list[int]:
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=count), timeout=30) as client:
        responses = await asyncio.gather(
            *[
                client.post(
                    f"{gw.base_url}/v1/chat/completions",
                    headers={"authorization": f"Bearer {KEY}"},
                    json={"model": "counted", "messages": [{"role": "user", "content": "x"}]},
                )
                for _ in range(count)
            ]
        )
    return [r.status_code for r in responses]


def test_breaker_two_hundred_concurrent_failures_from_four_workers_all_counted(fleet4: Gateway) -> None:
    statuses = asyncio.run(_burst(fleet4, 200))
    assert statuses == [502] * 200
    assert len(fleet4.sim_log("cnt~500")) == 200
    with redis.Redis.from_url(fleet4.redis_url) as r:
        data = r.hget("turnout:breaker:sim-a/cnt~500", "s")
        version = int(r.hget("turnout:breaker:sim-a/cnt~500", "v"))
    snapshot = msgspec.msgpack.decode(data, type=BreakerSnapshot)
    assert snapshot.run == 200
    assert 199.0 < snapshot.failures <= 200.0  # decayed by the seconds the burst took (half-life 2.5 h)
    assert snapshot.successes == 0.0 and not snapshot.open
    assert 4 <= version <= 200  # a write carries every result its worker queued while the one before ran
