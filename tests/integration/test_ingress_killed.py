"""Jobs whose ingress was killed run no upstream call, keyed ones excepted (issue 41, item 3).

Its own fleet (Redis, simulator, one worker of 20 slots, one ingress). 200 requests of 3 s are sent
at once, 10 of them with an `Idempotency-Key`; once 20 run upstream the ingress is killed
(SIGKILL). Its liveness lease runs out (1.5 s) with nobody listening on its reply channel, so the
worker withdraws each of its queued jobs at claim without an upstream call; the keyed ones run
to their end (a retried client gets the answer through another ingress). Prints the figures.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator

import httpx
import pytest

from support.gateway import ACME_ORG, BREAKER_OFF, Gateway, start_gateway
from support.procs import Fleet, require_redis

pytestmark = pytest.mark.integration

KEY = "tk-test-ingresskill-0001"
REQUESTS = 200
KEYED = 10
SLOTS = 20
PLAIN = "plain~200+3000ms"
KEYED_UPSTREAM = "keyed~200+3000ms"

CONFIG = (
    """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
models:
  plain: {{offers: [{{provider: sim-a, model: "{plain}"}}]}}
  keyed: {{offers: [{{provider: sim-a, model: "{keyed}"}}]}}
policy:
  retry: {{max_retries: 0}}
  budget: {{max_total_latency_ms: 60000}}
gateway: {{worker_max_jobs: {slots}, max_queue_depth: 1000}}
"""
    + BREAKER_OFF
    + ACME_ORG
)


@pytest.fixture(scope="module")
def kill_gw() -> Iterator[Gateway]:
    require_redis()
    fleet = Fleet()
    try:
        yield start_gateway(fleet, CONFIG, key=KEY, plain=PLAIN, keyed=KEYED_UPSTREAM, slots=str(SLOTS))
    finally:
        fleet.stop_all()


async def _flood(gw: Gateway) -> None:
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=REQUESTS), timeout=30) as client:

        async def one(i: int) -> None:
            keyed = i % (REQUESTS // KEYED) == 0
            headers = {"authorization": f"Bearer {KEY}"} | ({"idempotency-key": f"kill-{i}"} if keyed else {})
            body = {"model": "keyed" if keyed else "plain", "messages": [{"role": "user", "content": "hi"}]}
            await client.post(f"{gw.base_url}/v1/chat/completions", headers=headers, json=body)

        await asyncio.gather(*[one(i) for i in range(REQUESTS)], return_exceptions=True)


def test_jobs_of_a_killed_ingress_make_no_upstream_call_keyed_ones_excepted(kill_gw: Gateway) -> None:
    ingress = next(p for p in kill_gw.fleet.procs if p.name.startswith("ingress"))
    killed_at = 0.0

    async def scenario() -> None:
        nonlocal killed_at
        flood = asyncio.ensure_future(_flood(kill_gw))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if len(kill_gw.sim_log(PLAIN)) + len(kill_gw.sim_log(KEYED_UPSTREAM)) >= SLOTS:
                break
            await asyncio.sleep(0.02)
        ingress.popen.send_signal(signal.SIGKILL)
        killed_at = time.time()
        await flood

    asyncio.run(scenario())
    time.sleep(12)  # the running jobs end; the queued ones are claimed and withdrawn (or, keyed, run)
    plain = kill_gw.sim_log(PLAIN)
    keyed = kill_gw.sim_log(KEYED_UPSTREAM)
    plain_after = [c for c in plain if float(c["t_s"]) > killed_at]  # type: ignore[arg-type]
    keyed_after = [c for c in keyed if float(c["t_s"]) > killed_at]  # type: ignore[arg-type]
    print(
        f"\ningress SIGKILL with {REQUESTS} requests ({KEYED} keyed), {len(plain) + len(keyed) - len(plain_after) - len(keyed_after)} "
        f"running: {len(plain_after)} upstream calls after the kill for unkeyed jobs, {len(keyed_after)} for keyed ones "
        f"(of {KEYED}; they run to their end)"
    )
    assert plain_after == []
