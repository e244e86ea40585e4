"""Attempt records survive a worker SIGKILL (real processes): every upstream call
the killed worker made is one record, flagged lost, and the re-run's are `is_rerun`."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from support.gateway import ACME_ORG, BREAKER_OFF, Gateway, start_gateway
from support.procs import Fleet, require_redis, wait_until

pytestmark = pytest.mark.integration

KEY = "tk-test-records-kill-0001"
KEY_ADMIN = "tk-test-records-admin-001"
IN_FLIGHT = 100
UPSTREAM = "rk~200+4000ms"

CONFIG = (
    """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
models:
  slow: {{offers: [{{provider: sim-a, model: "{upstream}"}}]}}
gateway: {{job_lease_s: 2, max_queue_depth: 1000, worker_max_jobs: 100, records_max: 10000}}
"""
    + BREAKER_OFF
    + ACME_ORG
    + """      - {{name: admin, key: {key_admin}, admin: true}}
"""
)


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    """Redis (AOF), simulator, one worker with a short job lease, one ingress."""
    require_redis()
    fleet = Fleet()
    try:
        yield start_gateway(fleet, CONFIG, key=KEY, key_admin=KEY_ADMIN, upstream=UPSTREAM)
    finally:
        fleet.stop_all()


async def _burst(gw: Gateway, count: int) -> list[httpx.Response]:
    body = {"model": "slow", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=count), timeout=60) as client:
        return await asyncio.gather(
            *[
                client.post(f"{gw.base_url}/v1/chat/completions", json=body, headers={"authorization": f"Bearer {KEY}"})
                for _ in range(count)
            ]
        )


def _export(gw: Gateway) -> list[dict[str, Any]]:
    response = httpx.get(
        f"{gw.base_url}/admin/v1/logs/export", headers={"authorization": f"Bearer {KEY_ADMIN}"}, timeout=30
    )
    assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.text.splitlines() if line]


def test_sigkill_with_attempts_in_flight_leaves_one_record_per_upstream_call(gw: Gateway) -> None:
    async def scenario() -> list[httpx.Response]:
        burst = asyncio.ensure_future(_burst(gw, IN_FLIGHT))
        # every call has reached the upstream (so may be billed): kill the worker mid-call
        await asyncio.to_thread(wait_until, lambda: len(gw.sim_log(UPSTREAM)) >= IN_FLIGHT, 30, "calls in flight")
        [victim] = [p for p in gw.fleet.procs if p.name.startswith("worker") and p.alive()]
        victim.stop(signal.SIGKILL)
        config = gw.fleet.workdir / "turnout.yaml"
        await asyncio.to_thread(gw.fleet.worker, config, gw.redis_url, f"worker-after-kill-{int(time.time())}")
        return await burst

    responses = asyncio.run(scenario())
    calls = len(gw.sim_log(UPSTREAM))
    assert [r.status_code for r in responses] == [200] * IN_FLIGHT
    request_ids = {r.headers["x-request-id"] for r in responses}

    def settled() -> list[dict[str, Any]] | None:
        rows = [r for r in _export(gw) if r["request_id"] in request_ids]
        return rows if len(rows) == calls and not any(r["kind"] == "in_flight" for r in rows) else None

    rows: list[dict[str, Any]] | None = None

    def check() -> bool:
        nonlocal rows
        rows = settled()
        return rows is not None

    wait_until(check, 20, "one record per upstream call")
    assert rows is not None
    lost = [r for r in rows if r["lost"]]
    reruns = [r for r in rows if r["is_rerun"]]
    print(
        f"\nSIGKILL with {IN_FLIGHT} in flight: {calls} upstream calls, {len(rows)} records, "
        f"{len(lost)} lost, {len(reruns)} is_rerun"
    )
    assert calls == 2 * IN_FLIGHT
    assert len({r["attempt_id"] for r in rows}) == len(rows)
    assert Counter(r["request_id"] for r in rows) == {rid: 2 for rid in request_ids}
    assert len(lost) == IN_FLIGHT and all(
        (r["kind"], r["class"], r["cost_usd"], r["status"], r["is_rerun"]) == ("lost", "lost", None, None, False)
        for r in lost
    )
    assert len(reruns) == IN_FLIGHT and all(r["kind"] == "success" and not r["lost"] for r in reruns)
    assert {r["request_id"] for r in lost} == {r["request_id"] for r in reruns} == request_ids
