"""A job waiting out a provider's `Retry-After` does not hold a worker slot.

Its own fleet (Redis, simulator, one worker with 4 slots, one ingress): 8
jobs of a model whose provider answers 429 with `Retry-After: 8` wait out
that hint while a healthy model's requests arrive; those are served at once
instead of after the wait. Prints the figures.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from support.gateway import ACME_ORG, BREAKER_OFF, Gateway, start_gateway
from support.procs import Fleet, require_redis

pytestmark = pytest.mark.integration

KEY = "tk-test-slotwait-00000001"
SLOTS = 4
LIMITED = "sw-limited~429ra8"
HEALTHY = "sw-healthy+100ms"

CONFIG = (
    """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
models:
  limited: {{offers: [{{provider: sim-a, model: "{limited}"}}]}}
  healthy: {{offers: [{{provider: sim-a, model: "{healthy}"}}]}}
policy:
  retry: {{max_retries: 1, respect_retry_after: true}}
  budget: {{max_total_latency_ms: 20000}}
gateway: {{worker_max_jobs: {slots}, max_queue_depth: 1000}}
"""
    + BREAKER_OFF
    + ACME_ORG
)


@pytest.fixture(scope="module")
def wait_gw() -> Iterator[Gateway]:
    require_redis()
    fleet = Fleet()
    try:
        yield start_gateway(fleet, CONFIG, key=KEY, limited=LIMITED, healthy=HEALTHY, slots=str(SLOTS))
    finally:
        fleet.stop_all()


async def _post(client: httpx.AsyncClient, gw: Gateway, model: str) -> tuple[int, float]:
    started = time.monotonic()
    response = await client.post(
        f"{gw.base_url}/v1/chat/completions",
        headers={"authorization": f"Bearer {KEY}"},
        json={"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
    )
    return response.status_code, time.monotonic() - started


async def _scenario(gw: Gateway) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    async with httpx.AsyncClient(timeout=60) as client:
        waiting = asyncio.ensure_future(asyncio.gather(*[_post(client, gw, "limited") for _ in range(2 * SLOTS)]))
        await asyncio.sleep(1.0)  # the limited jobs got their 429 and wait
        healthy = await asyncio.gather(*[_post(client, gw, "healthy") for _ in range(2 * SLOTS)])
        return await waiting, healthy


def test_retry_after_wait_frees_the_slot_for_a_healthy_model(wait_gw: Gateway) -> None:
    waited, healthy = asyncio.run(_scenario(wait_gw))
    p50_s = statistics.median(s for _, s in healthy)
    print(
        f"\n{2 * SLOTS} jobs waiting out Retry-After: 8 on {SLOTS} slots: healthy model p50 {p50_s:.2f} s, "
        f"max {max(s for _, s in healthy):.2f} s; waiting jobs {dict(Counter(c for c, _ in waited))} "
        f"in {max(s for _, s in waited):.1f} s; upstream calls of the limited model {len(wait_gw.sim_log(LIMITED))}"
    )
    assert [c for c, _ in healthy] == [200] * 2 * SLOTS
    assert p50_s < 1.0
