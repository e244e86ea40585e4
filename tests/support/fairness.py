"""Fair share between orgs in the queue (SPEC §10): the drive and its figures.

One worker with few slots (`worker_max_jobs`), one slow model; org B sends
requests one at a time, first on an idle fleet, then while org A floods the
queue with many more concurrent requests than there are slots. Used by
tests/integration/test_fair_share.py and bench/fair_share.py.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass

import httpx

KEY_A = "tk-test-fair-org-a-000001"
KEY_B = "tk-test-fair-org-b-000001"

CONFIG = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
models:
  slow: {{offers: [{{provider: sim-a, model: "fair~200+{upstream_ms}ms"}}]}}
gateway: {{worker_max_jobs: {slots}}}
breaker: {{consecutive_failures: 1000000, failure_rate: 2.0}}
orgs:
  org-a:
    keys: [{{name: a, key: {key_a}}}]
  org-b:
    keys: [{{name: b, key: {key_b}}}]
"""

BODY = {"model": "slow", "messages": [{"role": "user", "content": "hi"}]}


@dataclass
class Figures:
    """Latencies in seconds."""

    idle_b: list[float]
    flood_b: list[float]
    a_done: int
    a_ok: int
    flood_s: float

    @staticmethod
    def p99(values: list[float]) -> float:
        """The 99th percentile (nearest rank; the maximum below 100 samples)."""
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]

    def text(self) -> str:
        """One line per phase."""
        idle, flood = self.idle_b, self.flood_b
        return (
            f"org B idle: p50 {statistics.median(idle) * 1000:.0f} ms, p99 {self.p99(idle) * 1000:.0f} ms "
            f"({len(idle)} requests)\n"
            f"org B while org A floods: p50 {statistics.median(flood) * 1000:.0f} ms, "
            f"p99 {self.p99(flood) * 1000:.0f} ms ({len(flood)} requests) = "
            f"{self.p99(flood) / self.p99(idle):.2f}x idle p99\n"
            f"org A: {self.a_ok}/{self.a_done} answered 200 in {self.flood_s:.1f} s"
        )


async def _b_requests(client: httpx.AsyncClient, base: str, count: int, gap_s: float) -> list[float]:
    latencies = []
    for _ in range(count):
        started = time.monotonic()
        response = await client.post(
            f"{base}/v1/chat/completions", json=BODY, headers={"authorization": f"Bearer {KEY_B}"}
        )
        assert response.status_code == 200, response.text
        latencies.append(time.monotonic() - started)
        await asyncio.sleep(gap_s)
    return latencies


async def drive(base: str, *, flood: int, concurrency: int, samples: int, gap_s: float = 0.1) -> Figures:
    """Measure org B idle, then while org A sends `flood` requests `concurrency` at a time."""
    limits = httpx.Limits(max_connections=concurrency + 20)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        idle = await _b_requests(client, base, samples, gap_s)
        remaining = flood
        statuses: list[int] = []

        async def a_loop() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                response = await client.post(
                    f"{base}/v1/chat/completions", json=BODY, headers={"authorization": f"Bearer {KEY_A}"}
                )
                statuses.append(response.status_code)

        started = time.monotonic()
        flooding = [asyncio.create_task(a_loop()) for _ in range(concurrency)]
        await asyncio.sleep(1.0)  # let A's backlog build up
        during = await _b_requests(client, base, samples, gap_s)
        await asyncio.gather(*flooding)
        return Figures(
            idle_b=idle,
            flood_b=during,
            a_done=len(statuses),
            a_ok=sum(1 for s in statuses if s == 200),
            flood_s=time.monotonic() - started,
        )
