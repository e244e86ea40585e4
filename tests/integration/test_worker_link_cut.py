"""A worker cut off from Redis keeps its paid answers and delivers them when the link returns (issue 41, item 2).

Its own fleet (Redis, simulator, one ingress, one worker whose link to Redis runs through a
`support.tcp_pause.PausableProxy`). 20 jobs of 3 s run; the worker's link is cut for 10 s while
their upstream calls finish (every connection reset, new ones refused: `StateUnavailable` at
each delivery); every answer is kept and delivered once the link is back: each upstream call
made once (`/sim/log`), each client answered within job time + cut + 1 s. Prints the figures.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from support.gateway import ACME_ORG, BREAKER_OFF, Gateway
from support.procs import Fleet, require_redis
from support.tcp_pause import PausableProxy
from support.timed_posts import timed_posts

pytestmark = pytest.mark.integration

KEY = "tk-test-linkcut-00000001"
JOBS = 20
JOB_S = 3.0
CUT_S = 10.0
UPSTREAM = "paid~200+3000ms"

CONFIG = (
    """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
models:
  paid: {{offers: [{{provider: sim-a, model: "{upstream}"}}]}}
policy:
  retry: {{max_retries: 0}}
  budget: {{max_total_latency_ms: 60000}}
gateway: {{worker_max_jobs: 20, max_queue_depth: 1000}}
"""
    + BREAKER_OFF
    + ACME_ORG
)


@pytest.fixture(scope="module")
def cut_gw() -> Iterator[tuple[Gateway, PausableProxy]]:
    require_redis()
    fleet = Fleet()
    proxy: PausableProxy | None = None
    try:
        _, redis_url = fleet.redis()
        _, sim_url = fleet.sim()
        config_path = fleet.workdir / "turnout.yaml"
        config_path.write_text(CONFIG.format(sim=sim_url, key=KEY, upstream=UPSTREAM))
        proxy = PausableProxy(int(urlsplit(redis_url).port or 0))
        fleet.worker(config_path, f"redis://127.0.0.1:{proxy.port}/0", name="worker-cut")
        _, base = fleet.ingress(config_path, redis_url)
        yield Gateway(base_url=base, sim_url=sim_url, redis_url=redis_url, fleet=fleet), proxy
    finally:
        fleet.stop_all()  # the worker first: no connection comes to the proxy while it stops
        if proxy is not None:
            proxy.stop()


def test_a_worker_cut_off_from_redis_delivers_its_paid_answers_when_the_link_returns(
    cut_gw: tuple[Gateway, PausableProxy],
) -> None:
    gw, proxy = cut_gw

    async def scenario() -> list[tuple[int, float]]:
        sending = asyncio.ensure_future(timed_posts(gw.base_url, KEY, "paid", JOBS))
        deadline = time.monotonic() + 5
        while len(gw.sim_log(UPSTREAM)) < JOBS and time.monotonic() < deadline:  # all running upstream
            await asyncio.sleep(0.05)
        proxy.cut()
        await asyncio.sleep(CUT_S)
        proxy.restore()
        return await sending

    answers = asyncio.run(scenario())
    time.sleep(1.0)  # a re-run after a lost lease would call again within a scan
    calls = Counter(str(c["request_id"]) if "request_id" in c else str(i) for i, c in enumerate(gw.sim_log(UPSTREAM)))
    statuses = Counter(status for status, _ in answers)
    slowest = max(seconds for _, seconds in answers)
    print(
        f"\n{JOBS} jobs of {JOB_S:.0f} s, worker link cut {CUT_S:.0f} s: {sum(calls.values())} upstream calls "
        f"(paid twice: {sum(1 for n in calls.values() if n > 1)}), statuses {dict(statuses)}, slowest client {slowest:.1f} s "
        f"(bound {JOB_S + CUT_S + 1:.0f} s)"
    )
    assert statuses == {200: JOBS}
    assert sum(calls.values()) == JOBS
    assert slowest <= JOB_S + CUT_S + 1
