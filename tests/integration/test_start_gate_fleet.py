"""One start pass does not make a worker's jobs wait for each other's upstream.

Its own fleet (Redis, simulator, one worker with ONE start pass, one
ingress). Four requests to a model whose upstream answers after 6 s, then
one to a fast model. Read from the simulator's attempt log (arrival order,
and whether each request has been answered), so nothing here depends on the
machine's speed:

- all four slow requests reach the upstream before any of them is answered:
  a job waiting on its upstream does not keep the next from starting;
- the fast request is answered while all four are still waiting.

(That the pass is given back at the upstream call itself, not only after
the hold bound, is `tests/unit/worker/test_start_gate.py`'s.)
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from support.gateway import ACME_ORG, BREAKER_OFF, SIM_PROVIDERS, Gateway, running_gateway

pytestmark = pytest.mark.integration

KEY = "tk-test-startgate-0000001"
SLOW, FAST = "gate-slow~200+6000ms", "gate-fast"
CONFIG = (
    SIM_PROVIDERS
    + """\
models:
  slow: {{offers: [{{provider: sim-a, model: "{slow}"}}]}}
  fast: {{offers: [{{provider: sim-a, model: "{fast}"}}]}}
gateway: {{worker_max_jobs: 8, worker_start_passes: 1}}
"""
    + BREAKER_OFF
    + ACME_ORG
)
HANG_GUARD_S = 30.0  # a bound on waiting for the log, not a figure under test


async def _post(client: httpx.AsyncClient, gw: Gateway, model: str) -> int:
    response = await client.post(
        f"{gw.base_url}/v1/chat/completions",
        headers={"authorization": f"Bearer {KEY}"},
        json={"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
    )
    return response.status_code


async def _log(client: httpx.AsyncClient, gw: Gateway, model: str) -> list[dict[str, object]]:
    response = await client.get(f"{gw.sim_url}/sim/log", params={"model": model})
    response.raise_for_status()
    entries: list[dict[str, object]] = response.json()
    return entries


async def _scenario(gw: Gateway) -> None:
    async with httpx.AsyncClient(timeout=60) as client:
        slow = [asyncio.ensure_future(_post(client, gw, "slow")) for _ in range(4)]
        guard = time.monotonic() + HANG_GUARD_S
        while len(arrived := await _log(client, gw, SLOW)) < 4 and time.monotonic() < guard:
            await asyncio.sleep(0.05)
        assert len(arrived) == 4, f"only {len(arrived)} of 4 slow requests reached the upstream"
        assert all(entry["end"] is None for entry in arrived), (
            f"a slow request was answered before all arrived: {arrived}"
        )
        assert await _post(client, gw, "fast") == 200
        fast = await _log(client, gw, FAST)
        assert len(fast) == 1 and fast[0]["end"] is not None
        assert all(entry["end"] is None for entry in await _log(client, gw, SLOW)), (
            "the fast request was answered only after a slow one"
        )
        assert await asyncio.gather(*slow) == [200] * 4


def test_a_job_waiting_on_its_upstream_holds_no_start_pass() -> None:
    with running_gateway(CONFIG, key=KEY, slow=SLOW, fast=FAST) as gw:
        asyncio.run(_scenario(gw))
