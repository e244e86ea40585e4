"""Fair share between orgs in the queue (SPEC §10): the drive and its figures.

One worker with few slots (`worker_max_jobs`), one slow model; org B sends
requests one at a time, first on an idle fleet, then while org A keeps many
more requests in flight than there are slots (A's backlog waits in the
queue). Used by tests/integration/test_fair_share.py and bench/fair_share.py.

Two measures of each of B's requests while A floods:
- its latency (seconds), which depends on the machine and on when slots
  free: the bench's figure;
- how many of A's requests reached the upstream after B's request was sent
  and before B's did (`overtaken`), read from the simulator's attempt log
  (`GET /sim/log`, in arrival order; B's entry is found by the `x-request-id`
  the gateway forwards). It counts pickups, not time, so it does not depend
  on the machine's speed: first-in-first-out pickup makes it about A's
  backlog, fair share at most a few slots' worth.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass

import httpx

KEY_A = "tk-test-fair-org-a-000001"
KEY_B = "tk-test-fair-org-b-000001"

_FLEET = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
models:
  slow: {{offers: [{{provider: sim-a, model: "fair~200+{upstream_ms}ms"}}]}}
gateway: {{worker_max_jobs: {slots}}}
breaker: {{consecutive_failures: 1000000, failure_rate: 2.0}}
"""

CONFIG = (
    _FLEET
    + """\
orgs:
  org-a:
    keys: [{{name: a, key: {key_a}}}]
  org-b:
    keys: [{{name: b, key: {key_b}}}]
"""
)
"""Keys A and B in two orgs (format with `sim`, `upstream_ms`, `slots`, `key_a`, `key_b`)."""

ONE_ORG_CONFIG = (
    _FLEET
    + """\
orgs:
  org-a:
    keys: [{{name: a, key: {key_a}}}, {{name: b, key: {key_b}}}]
"""
)
"""Both keys in one org: B's requests share A's fair queue, first in first out (the control)."""

BODY = {"model": "slow", "messages": [{"role": "user", "content": "hi"}]}


@dataclass
class Figures:
    """Latencies in seconds; `overtaken` in requests, one per B request during the flood."""

    idle_b: list[float]
    flood_b: list[float]
    overtaken: list[int]
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
            f"org B overtaken by org A at the upstream: {self.overtaken} requests (max {max(self.overtaken)})\n"
            f"org A: {self.a_ok}/{self.a_done} answered 200 in {self.flood_s:.1f} s"
        )


async def _sim_log(client: httpx.AsyncClient, sim: str) -> list[dict[str, object]]:
    response = await client.get(f"{sim}/sim/log")
    response.raise_for_status()
    entries: list[dict[str, object]] = response.json()
    return entries


async def _b_requests(
    client: httpx.AsyncClient, base: str, sim: str, count: int, gap_s: float
) -> tuple[list[float], list[int]]:
    """B's latencies (s) and, for each request, how many others reached the upstream first."""
    latencies, overtaken = [], []
    for _ in range(count):
        seen = len(await _sim_log(client, sim))
        started = time.monotonic()
        response = await client.post(
            f"{base}/v1/chat/completions", json=BODY, headers={"authorization": f"Bearer {KEY_B}"}
        )
        latencies.append(time.monotonic() - started)
        assert response.status_code == 200, response.text
        request_id = response.headers["x-request-id"]
        later = (await _sim_log(client, sim))[seen:]
        mine = [i for i, entry in enumerate(later) if entry["request_id"] == request_id]
        assert len(mine) == 1, f"B's request {request_id} reached the upstream {len(mine)} times"
        overtaken.append(mine[0])
        await asyncio.sleep(gap_s)
    return latencies, overtaken


async def drive(base: str, sim: str, *, concurrency: int, samples: int, gap_s: float = 0.1) -> Figures:
    """Measure org B idle, then while org A keeps `concurrency` requests in flight.

    A floods from before B's second phase starts (after 1 s, to build its
    backlog) until it ends, so every one of B's requests meets the backlog.
    """
    limits = httpx.Limits(max_connections=concurrency + 20)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        idle, _ = await _b_requests(client, base, sim, samples, gap_s)
        b_done = asyncio.Event()
        statuses: list[int] = []

        async def a_loop() -> None:
            while not b_done.is_set():
                response = await client.post(
                    f"{base}/v1/chat/completions", json=BODY, headers={"authorization": f"Bearer {KEY_A}"}
                )
                statuses.append(response.status_code)

        started = time.monotonic()
        flooding = [asyncio.create_task(a_loop()) for _ in range(concurrency)]
        try:
            await asyncio.sleep(1.0)  # let A's backlog build up
            during, overtaken = await _b_requests(client, base, sim, samples, gap_s)
        finally:
            b_done.set()
        await asyncio.gather(*flooding)
        return Figures(
            idle_b=idle,
            flood_b=during,
            overtaken=overtaken,
            a_done=len(statuses),
            a_ok=sum(1 for s in statuses if s == 200),
            flood_s=time.monotonic() - started,
        )
