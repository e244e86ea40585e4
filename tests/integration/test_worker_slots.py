"""A worker runs at most `worker_max_jobs` jobs at once, and each job once. and each job once.

Its own fleet (Redis, simulator, one ingress, workers per test) with
`gateway.worker_max_jobs` small; concurrency is read from the simulator's
attempt log (each call's arrival and end). Prints the figures.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from support.gateway import ACME_ORG, BREAKER_OFF, Gateway, start_gateway
from support.procs import Fleet, require_redis

pytestmark = pytest.mark.integration

KEY = "tk-test-slots-00000000001"
SLOTS = 4
SLOW = "slots-slow~200+700ms"
HANG = "slots-hang~hang"

CONFIG = (
    """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
models:
  slow: {{offers: [{{provider: sim-a, model: "{slow}"}}]}}
  hang: {{offers: [{{provider: sim-a, model: "{hang}"}}]}}
policy:
  retry: {{max_retries: 0, per_attempt_timeout_ms: 1000}}
  budget: {{max_total_latency_ms: 8000}}
gateway: {{worker_max_jobs: {slots}, max_queue_depth: 1000}}
"""
    + BREAKER_OFF
    + ACME_ORG
)


@pytest.fixture(scope="module")
def slots_gw() -> Iterator[Gateway]:
    require_redis()
    fleet = Fleet()
    try:
        yield start_gateway(fleet, CONFIG, workers=1, key=KEY, slow=SLOW, hang=HANG, slots=str(SLOTS))
    finally:
        fleet.stop_all()


async def _many(gw: Gateway, model: str, count: int) -> list[httpx.Response]:
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=count), timeout=60) as client:
        return await asyncio.gather(
            *[
                client.post(
                    f"{gw.base_url}/v1/chat/completions",
                    headers={"authorization": f"Bearer {KEY}"},
                    json={"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
                )
                for _ in range(count)
            ]
        )


GONE_NOTICED_S = 0.025
"""How late the simulator may log a connection its client closed (it notices within ~20 ms)."""


def most_at_once(calls: list[dict[str, object]]) -> int:
    """The largest number of calls open at one moment (arrival `t_s` to end `ended_s`).

    A call the worker ended (`client_gone`) is taken as closed `GONE_NOTICED_S`
    before the simulator logged it; a whole extra job overlaps by seconds.
    """

    def end_s(call: dict[str, object]) -> float:
        return float(call["ended_s"]) - (GONE_NOTICED_S if call["end"] == "client_gone" else 0.0)  # type: ignore[arg-type]

    events = sorted([(float(c["t_s"]), 1) for c in calls] + [(end_s(c), -1) for c in calls])  # type: ignore[arg-type]
    open_now = peak = 0
    for _, step in events:  # at equal times an end sorts before an arrival
        open_now += step
        peak = max(peak, open_now)
    return peak


@pytest.mark.parametrize("model", ["slow", "hang"])
def test_worker_never_runs_more_jobs_than_its_slots(slots_gw: Gateway, model: str) -> None:
    upstream = SLOW if model == "slow" else HANG
    responses = asyncio.run(_many(slots_gw, model, 3 * SLOTS))
    calls = slots_gw.sim_log(upstream)
    peak = most_at_once(calls)
    print(
        f"\n{model}: {3 * SLOTS} requests on {SLOTS} slots: {len(calls)} upstream calls, at most {peak} at once, "
        f"statuses {dict(Counter(r.status_code for r in responses))}"
    )
    assert peak <= SLOTS


BURST = 60
BURST_SLOTS = 5
BURST_UPSTREAM = "burst~200+2000ms"


@pytest.fixture(scope="module")
def burst_gw() -> Iterator[Gateway]:
    require_redis()
    fleet = Fleet()
    try:
        yield start_gateway(
            fleet,
            CONFIG.replace("max_total_latency_ms: 8000", "max_total_latency_ms: 60000").replace(
                ", per_attempt_timeout_ms: 1000", ""
            ),
            workers=2,
            key=KEY,
            slow=BURST_UPSTREAM,
            hang=HANG,
            slots=str(BURST_SLOTS),
        )
    finally:
        fleet.stop_all()


def test_burst_larger_than_the_slots_runs_each_job_once(burst_gw: Gateway) -> None:
    """60 jobs of 2 s on 2 x 5 slots take 12 s, past the 10 s lease of a job claimed early."""
    responses = asyncio.run(_many(burst_gw, "slow", BURST))
    calls = burst_gw.sim_log(BURST_UPSTREAM)
    runs = Counter(str(c["request_id"]) for c in calls)
    twice = sum(n > 1 for n in runs.values())
    print(
        f"\n{BURST}-job burst on 2 x {BURST_SLOTS} slots: {len(calls)} upstream calls, {twice} jobs ran twice, "
        f"at most {most_at_once(calls)} at once, statuses {dict(Counter(r.status_code for r in responses))}"
    )
    assert [r.status_code for r in responses] == [200] * BURST
    assert twice == 0
