"""A worker's wall clock does not decide its jobs' deadlines (Redis `TIME` does).

Its own fleet (Redis, simulator, one ingress); each test starts one worker
whose Python wall clock is 30 s ahead or behind (`support/skewclock`), runs
its scenario and stops it. Prints the figures.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from support.gateway import ACME_ORG, BREAKER_OFF, Gateway, start_gateway
from support.procs import Fleet, Proc, free_port, require_redis, wait_until

pytestmark = pytest.mark.integration

KEY = "tk-test-clock-0000000001"
BUDGET_S = 3.0
SLOW_FAIL = "clk-fail~503+1000ms"

CONFIG = (
    """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
models:
  quick: {{offers: [{{provider: sim-a, model: "clk-quick+100ms"}}]}}
  slow-fail: {{offers: [{{provider: sim-a, model: "{slow_fail}"}}]}}
policy:
  retry: {{max_retries: 6, base_ms: 250, max_ms: 250}}
  budget: {{max_attempts: 6, max_total_latency_ms: {budget_ms}}}
"""
    + BREAKER_OFF
    + ACME_ORG
)

SKEW_DIR = str(Path(__file__).resolve().parent.parent / "support" / "skewclock")


@pytest.fixture(scope="module")
def clock_gw() -> Iterator[Gateway]:
    require_redis()
    fleet = Fleet()
    try:
        yield start_gateway(fleet, CONFIG, workers=0, key=KEY, slow_fail=SLOW_FAIL, budget_ms=str(int(BUDGET_S * 1000)))
    finally:
        fleet.stop_all()


def _skewed_worker(gw: Gateway, skew_s: float, env: dict[str, str] | None = None) -> Proc:
    path = os.pathsep.join(p for p in (SKEW_DIR, os.environ.get("PYTHONPATH", "")) if p)
    return gw.fleet.worker(
        gw.fleet.workdir / "turnout.yaml",
        gw.redis_url,
        name=f"worker-skew{skew_s:+.0f}",
        env={"PYTHONPATH": path, "TURNOUT_TEST_SKEW_S": str(skew_s), **(env or {})},
    )


def _skew_gauge(metrics_url: str) -> float | None:
    try:
        text = httpx.get(metrics_url, timeout=2).text
    except httpx.HTTPError:
        return None
    for line in text.splitlines():
        if line.startswith("turnout_clock_skew_seconds "):
            return float(line.split()[1])
    return None


async def _many(gw: Gateway, model: str, count: int) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=30) as client:
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


def test_worker_clock_30s_ahead_still_serves_every_job(clock_gw: Gateway) -> None:
    worker = _skewed_worker(clock_gw, +30.0)
    try:
        responses = asyncio.run(_many(clock_gw, "quick", 12))
    finally:
        worker.stop()
    served = sum(r.status_code == 200 for r in responses)
    print(f"\nworker clock +30 s: {served}/12 served, upstream calls {len(clock_gw.sim_log('clk-quick+100ms'))}")
    assert served == 12


def test_worker_clock_30s_behind_calls_no_provider_after_the_deadline(clock_gw: Gateway) -> None:
    worker = _skewed_worker(clock_gw, -30.0)
    try:
        sent_s = time.time()
        responses = asyncio.run(_many(clock_gw, "slow-fail", 6))
    finally:
        worker.stop()
    calls = clock_gw.sim_log(SLOW_FAIL)
    late = [c for c in calls if float(c["t_s"]) > sent_s + BUDGET_S + 0.1]  # type: ignore[arg-type]
    print(
        f"\nworker clock -30 s: statuses {sorted({r.status_code for r in responses})}, "
        f"{len(calls)} upstream calls, {len(late)} started after the client's deadline"
    )
    assert all(r.status_code in (502, 503, 504) for r in responses)
    assert late == []


def test_a_worker_30s_ahead_reports_its_skew_in_a_metric_and_a_warning(clock_gw: Gateway) -> None:
    port = free_port()
    worker = _skewed_worker(clock_gw, +30.0, env={"TURNOUT_METRICS_PORT": str(port)})
    try:
        metrics_url = f"http://127.0.0.1:{port}/metrics"
        wait_until(lambda: _skew_gauge(metrics_url) not in (None, 0.0), 15, "the worker's skew gauge")
        worker_skew = _skew_gauge(metrics_url)
        wait_until(lambda: "clock_skew_s" in worker.log(), 15, "the worker's skew warning")
        warning = next(line for line in worker.log().splitlines() if "clock_skew_s" in line)
    finally:
        worker.stop()
    ingress_skew = _skew_gauge(f"{clock_gw.base_url}/metrics")
    print(
        f"\nworker clock +30 s: turnout_clock_skew_seconds {worker_skew:.3f} (ingress {ingress_skew}); log: {warning}"
    )
    assert worker_skew == pytest.approx(30.0, abs=0.5)
    logged = json.loads(warning)
    assert logged["clock_skew_s"] == pytest.approx(30.0, abs=0.5)
    assert (logged["level"], logged["service_kind"]) == ("WARNING", "turnout-worker")
    assert ingress_skew is not None and abs(ingress_skew) < 1.0  # the ingress's clock is right: gauge, no warning
