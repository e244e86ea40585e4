"""A paused Redis (SIGSTOP) never holds a request past a bounded wait.

Its own fleet (Redis, simulator, one worker, one ingress): Redis is paused
while requests arrive on the queued path; each is answered (503 with
`Retry-After`) within 1.5 s, and service resumes once Redis does. Prints the
figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from support.gateway import Gateway, start_gateway
from support.procs import Fleet, require_redis, wait_until

pytestmark = pytest.mark.integration

KEY = "tk-test-paused-000000001"
PAUSE_S = 4.0
BOUND_S = 1.5

CONFIG = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
models:
  quick: {{offers: [{{provider: sim-a, model: "paused-quick"}}]}}
orgs:
  acme:
    keys:
      - {{name: main, key: {key}}}
"""


@pytest.fixture(scope="module")
def paused_gw() -> Iterator[Gateway]:
    require_redis()
    fleet = Fleet()
    try:
        yield start_gateway(fleet, CONFIG, key=KEY, env={"TURNOUT_REDIS_CALL_TIMEOUT_MS": "400"})  # the default
    finally:
        fleet.stop_all()


@contextlib.contextmanager
def _redis_paused(gw: Gateway) -> Iterator[None]:
    """Redis stopped (SIGSTOP: connections stay open, nothing answers) for the block."""
    redis_proc = next(p for p in gw.fleet.procs if p.name.startswith("redis"))
    redis_proc.popen.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        redis_proc.popen.send_signal(signal.SIGCONT)


def _post(gw: Gateway) -> httpx.Response:
    return httpx.post(
        f"{gw.base_url}/v1/chat/completions",
        headers={"authorization": f"Bearer {KEY}"},
        json={"model": "quick", "messages": [{"role": "user", "content": "hi"}]},
        timeout=60,
    )


async def _during_pause(gw: Gateway, count: int) -> list[tuple[int, str | None, float]]:
    async def one(client: httpx.AsyncClient, delay_s: float) -> tuple[int, str | None, float]:
        await asyncio.sleep(delay_s)
        started = time.monotonic()
        response = await client.post(
            f"{gw.base_url}/v1/chat/completions",
            headers={"authorization": f"Bearer {KEY}"},
            json={"model": "quick", "messages": [{"role": "user", "content": "hi"}]},
        )
        return response.status_code, response.headers.get("retry-after"), time.monotonic() - started

    async with httpx.AsyncClient(timeout=60) as client:
        return await asyncio.gather(*[one(client, i * (PAUSE_S - BOUND_S) / count) for i in range(count)])


def test_paused_redis_answers_every_request_within_the_bound(paused_gw: Gateway) -> None:
    assert _post(paused_gw).status_code == 200
    with _redis_paused(paused_gw):
        outcomes = asyncio.run(_during_pause(paused_gw, 20))
    slowest = max(s for _, _, s in outcomes)
    print(
        f"\nRedis paused {PAUSE_S:.0f} s: {len(outcomes)} requests, statuses {dict(Counter(c for c, _, _ in outcomes))}, "
        f"slowest {slowest:.2f} s"
    )
    wait_until(lambda: _post(paused_gw).status_code == 200, 20, "service after Redis resumed")
    assert all(code == 503 and retry for code, retry, _ in outcomes)
    assert slowest < BOUND_S


async def _streams_during_pause(gw: Gateway, count: int) -> list[tuple[int, float]]:
    async def one(client: httpx.AsyncClient) -> tuple[int, float]:
        started = time.monotonic()
        async with client.stream(
            "POST",
            f"{gw.base_url}/v1/chat/completions",
            headers={"authorization": f"Bearer {KEY}"},
            json={"model": "quick", "messages": [{"role": "user", "content": "hi"}], "stream": True},
        ) as response:
            await response.aread()
        return response.status_code, time.monotonic() - started

    async with httpx.AsyncClient(timeout=60) as client:
        return await asyncio.gather(*[one(client) for _ in range(count)])


def test_paused_redis_streams_end_within_the_bound(paused_gw: Gateway) -> None:
    wait_until(lambda: _post(paused_gw).status_code == 200, 20, "service before the pause")
    with _redis_paused(paused_gw):
        outcomes = asyncio.run(_streams_during_pause(paused_gw, 10))
    slowest = max(s for _, s in outcomes)
    print(f"\nRedis paused, streams: {dict(Counter(c for c, _ in outcomes))}, slowest {slowest:.2f} s")
    assert all(code in (200, 503) for code, _ in outcomes)
    assert slowest < BOUND_S
