"""A request whose client leaves while its job is queued never reaches a provider.

Its own fleet (Redis, simulator, one ingress, no worker at first): clients
send and leave before any worker runs; a worker started afterwards makes no
upstream call, and no queue structure keeps the jobs. Prints the figures.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import cast

import httpx
import pytest
import redis

from support.gateway import Gateway, start_gateway
from support.procs import Fleet, require_redis, wait_until
from turnout.state import keys

pytestmark = pytest.mark.integration

KEY = "tk-test-abandon-000000001"
UPSTREAM = "abandon-queued"
LEFT = 8

CONFIG = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
models:
  queued: {{offers: [{{provider: sim-a, model: "{upstream}"}}]}}
orgs:
  acme:
    keys:
      - {{name: main, key: {key}}}
"""


@pytest.fixture(scope="module")
def abandon_gw() -> Iterator[Gateway]:
    require_redis()
    fleet = Fleet()
    try:
        yield start_gateway(fleet, CONFIG, workers=0, key=KEY, upstream=UPSTREAM)
    finally:
        fleet.stop_all()


async def _leave_early(gw: Gateway, count: int) -> int:
    """Send `count` requests, each client leaving after 0.5 s; returns how many timed out."""
    async with httpx.AsyncClient(timeout=0.5) as client:
        outcomes = await asyncio.gather(
            *[
                client.post(
                    f"{gw.base_url}/v1/chat/completions",
                    headers={"authorization": f"Bearer {KEY}"},
                    json={"model": "queued", "messages": [{"role": "user", "content": "hi"}]},
                )
                for _ in range(count)
            ],
            return_exceptions=True,
        )
    return sum(isinstance(o, httpx.TimeoutException) for o in outcomes)


def test_client_leaving_while_queued_withdraws_the_job(abandon_gw: Gateway) -> None:
    left = asyncio.run(_leave_early(abandon_gw, LEFT))
    store = redis.Redis.from_url(abandon_gw.redis_url)
    wait_until(lambda: store.zcard(keys.QUEUE) == 0, 5, "queued jobs withdrawn")
    worker = abandon_gw.fleet.worker(abandon_gw.fleet.workdir / "turnout.yaml", abandon_gw.redis_url)
    try:
        ok = httpx.post(
            f"{abandon_gw.base_url}/v1/chat/completions",
            headers={"authorization": f"Bearer {KEY}"},
            json={"model": "queued", "messages": [{"role": "user", "content": "still there"}]},
            timeout=10,
        )
        time.sleep(1.5)  # past the worker's scan (1 s): a job left anywhere would have run by now
    finally:
        worker.stop()
    calls = len(abandon_gw.sim_log(UPSTREAM))
    leftovers = {
        "queue": store.zcard(keys.QUEUE),
        "fair": store.zcard(keys.fair_org_key("acme")),
        "ring": store.llen(keys.FAIR_RING),
        "jobs": len(cast(list[bytes], store.keys(keys.JOB_PREFIX + "*"))),
    }
    print(
        f"\n{left} clients left while queued: {calls - 1} upstream calls for them after a worker started; "
        f"left in Redis {leftovers}"
    )
    assert left == LEFT
    assert ok.status_code == 200
    assert calls == 1  # only the client that stayed
    assert leftovers == {"queue": 0, "fair": 0, "ring": 0, "jobs": 0}
