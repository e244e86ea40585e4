"""Overload: three times the queue's capacity at once sheds with 503, never hangs.

Its own fleet (Redis, simulator, one worker, one ingress) with
`gateway.max_queue_depth: 40` and an upstream that takes 1.5 s per call; 120
concurrent requests. Every request is answered: some 200, the rest 503
`queue_full` with `Retry-After`; the queue never holds more than 40 jobs; the
ingress's resident memory stays bounded. Prints the figures.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import cast

import httpx
import psutil
import pytest
import redis

from support.gateway import ACME_ORG, BREAKER_OFF, Gateway, start_gateway
from support.procs import Fleet, require_redis
from turnout.state import keys

pytestmark = pytest.mark.integration

KEY = "tk-test-overload-00000001"
DEPTH = 40
BURST = 3 * DEPTH
RSS_LIMIT_MIB = 300
UPSTREAM = "ovl~200+1500ms"

CONFIG = (
    """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
models:
  slow: {{offers: [{{provider: sim-a, model: "{upstream}"}}]}}
  quick: {{offers: [{{provider: sim-a, model: quick}}]}}
gateway: {{max_queue_depth: {depth}}}
"""
    + BREAKER_OFF
    + ACME_ORG
)


@pytest.fixture(scope="module")
def overload_gw() -> Iterator[Gateway]:
    require_redis()
    fleet = Fleet()
    try:
        yield start_gateway(fleet, CONFIG, key=KEY, depth=str(DEPTH), upstream=UPSTREAM)
    finally:
        fleet.stop_all()


def _pid(gw: Gateway, prefix: str) -> int:
    return next(p.popen.pid for p in gw.fleet.procs if p.name.startswith(prefix) and p.alive())


def _mib(rss: int) -> float:
    return rss / 2**20


class Sampler:
    """Samples process RSS and the Redis queue depth every 20 ms in a thread."""

    def __init__(self, pids: dict[str, int], redis_url: str) -> None:
        self.procs = {name: psutil.Process(pid) for name, pid in pids.items()}
        self.peak_rss = {name: p.memory_info().rss for name, p in self.procs.items()}
        self.max_depth = 0
        self._redis = redis.Redis.from_url(redis_url)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for name, proc in self.procs.items():
                self.peak_rss[name] = max(self.peak_rss[name], proc.memory_info().rss)
            self.max_depth = max(self.max_depth, cast(int, self._redis.zcard(keys.QUEUE)))
            self._stop.wait(0.02)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._redis.close()  # type: ignore[no-untyped-call]  # untyped in redis-py 5.2


async def _burst(gw: Gateway) -> list[tuple[httpx.Response, float]]:
    async def one(client: httpx.AsyncClient) -> tuple[httpx.Response, float]:
        started = time.monotonic()
        response = await client.post(
            f"{gw.base_url}/v1/chat/completions",
            json={"model": "slow", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
            headers={"authorization": f"Bearer {KEY}"},
        )
        return response, time.monotonic() - started

    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=BURST), timeout=60) as client:
        return await asyncio.wait_for(asyncio.gather(*[one(client) for _ in range(BURST)]), 90)


def test_three_times_capacity_sheds_with_503_queue_full_and_memory_stays_bounded(overload_gw: Gateway) -> None:
    gw = overload_gw
    pids = {"ingress": _pid(gw, "ingress"), "worker": _pid(gw, "worker")}
    rest = {name: psutil.Process(pid).memory_info().rss for name, pid in pids.items()}
    started = time.monotonic()
    with Sampler(pids, gw.redis_url) as sampler:
        results = asyncio.run(_burst(gw))
    elapsed = time.monotonic() - started
    after = {name: psutil.Process(pid).memory_info().rss for name, pid in pids.items()}

    statuses = Counter(r.status_code for r, _ in results)
    ok = [(r, t) for r, t in results if r.status_code == 200]
    shed = [(r, t) for r, t in results if r.status_code == 503]
    print(
        f"\noverload: {BURST} concurrent requests, max_queue_depth {DEPTH}, upstream 1.5 s: "
        f"{dict(sorted(statuses.items()))} in {elapsed:.1f} s; queue depth peaked at {sampler.max_depth}; "
        f"503s answered in at most {max((t for _, t in shed), default=0):.2f} s, "
        f"200s in at most {max((t for _, t in ok), default=0):.2f} s"
    )
    for name in pids:
        print(
            f"overload: {name} RSS at rest {_mib(rest[name]):.1f} MiB, peak {_mib(sampler.peak_rss[name]):.1f} MiB, "
            f"after {_mib(after[name]):.1f} MiB"
        )

    assert len(results) == BURST  # every request answered, none hung (bounded by wait_for)
    assert set(statuses) <= {200, 503}, statuses
    assert ok, "no request was served"
    assert shed, "nothing was shed at three times the capacity"
    assert sampler.max_depth <= DEPTH
    for response, _ in ok:
        assert response.json()["choices"][0]["message"]["content"]
    for response, latency in shed:
        error = response.json()["error"]
        assert error["code"] == "queue_full", error
        assert error["type"] and error["message"]
        assert int(response.headers["retry-after"]) >= 1
        assert latency < 10, "a shed request must be answered at once, not after waiting"
    assert _mib(sampler.peak_rss["ingress"]) < RSS_LIMIT_MIB

    # the fleet recovers: once the burst is drained a new request is served
    response = httpx.post(
        f"{gw.base_url}/v1/chat/completions",
        json={"model": "quick", "messages": [{"role": "user", "content": "hi"}]},
        headers={"authorization": f"Bearer {KEY}"},
        timeout=30,
    )
    assert response.status_code == 200


SUSTAIN_S = 10.0  # the 30 s in a shorter, CI-sized run; `TURNOUT_OVERLOAD_S` overrides
PAUSE_AFTER_503_S = 0.2  # clients back off a little, bounding the request rate


async def _sustained(gw: Gateway, duration_s: float) -> Counter[int]:
    statuses: Counter[int] = Counter()
    stop_at = time.monotonic() + duration_s

    async def client_loop(client: httpx.AsyncClient) -> None:
        while time.monotonic() < stop_at:
            response = await client.post(
                f"{gw.base_url}/v1/chat/completions",
                json={"model": "slow", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
                headers={"authorization": f"Bearer {KEY}"},
            )
            statuses[response.status_code] += 1
            if response.status_code == 503:
                assert response.headers.get("retry-after")
                await asyncio.sleep(PAUSE_AFTER_503_S)

    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=BURST), timeout=60) as client:
        await asyncio.wait_for(asyncio.gather(*[client_loop(client) for _ in range(BURST)]), duration_s + 60)
    return statuses


def test_sustained_three_times_capacity_keeps_shedding_with_bounded_memory(overload_gw: Gateway) -> None:
    import os

    duration_s = float(os.environ.get("TURNOUT_OVERLOAD_S", SUSTAIN_S))
    gw = overload_gw
    pids = {"ingress": _pid(gw, "ingress"), "worker": _pid(gw, "worker")}
    with Sampler(pids, gw.redis_url) as sampler:
        statuses = asyncio.run(_sustained(gw, duration_s))
    print(
        f"\nsustained {BURST} clients for {duration_s:.0f} s against depth {DEPTH}: {dict(statuses)}; "
        f"max queue {sampler.max_depth}; peak RSS "
        + ", ".join(f"{n} {_mib(v):.1f} MiB" for n, v in sampler.peak_rss.items())
    )
    assert set(statuses) <= {200, 503}
    assert statuses[200] > 0 and statuses[503] > 0
    assert sampler.max_depth <= DEPTH
    assert all(_mib(v) < RSS_LIMIT_MIB for v in sampler.peak_rss.values())
