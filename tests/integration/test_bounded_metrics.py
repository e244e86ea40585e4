"""Bounded metrics against a real fleet (#40 item 6): 10,000 tenant-chosen model names keep the worker's
`/metrics` and RSS bounded, and `TURNOUT_METRICS_TOKEN` guards `/metrics` on the ingress and the worker."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from support.gateway import Gateway
from support.procs import free_port
from support.tenancy import BETA_ADMIN, tenancy_env, tenancy_fleet

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]  # 10,000 settings writes, one at a time

TOKEN = "metrics-token-integration-000001"
NAMES = 10_000


@pytest.fixture(scope="module")
def fleet() -> Iterator[tuple[Gateway, int]]:
    port = free_port()
    with tenancy_fleet(tenancy_env() | {"TURNOUT_METRICS_PORT": str(port), "TURNOUT_METRICS_TOKEN": TOKEN}) as gw:
        yield gw, port


def worker_rss_kib(gw: Gateway) -> int:
    """The worker's resident set, KiB (`/proc/<pid>/status`)."""
    pid = next(p.popen.pid for p in gw.fleet.procs if p.name == "worker-0")
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1])


def scrape(url: str) -> httpx.Response:
    return httpx.get(url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=10)


LANES = 16


async def send(gw: Gateway, names: range) -> tuple[list[int], float]:
    """Reach the worker with each tenant-chosen model name: beta's admin points one of its keys at
    `custom:beta-ep:tenant-model-<i>` (a reroute, as a tenant may) and sends one request with that key;
    `LANES` keys at a time. Returns the answers' statuses and the seconds it took."""
    admin = {"authorization": f"Bearer {BETA_ADMIN}"}
    writes = asyncio.Lock()  # one write at a time: the org's document is written whole (a conflict is a 503)
    async with httpx.AsyncClient(base_url=gw.base_url, timeout=60) as client:

        async def lane(lane_id: int) -> list[int]:
            name = f"lane-{names.start}-{lane_id}"
            async with writes:
                made = await client.post("/admin/v1/orgs/beta/keys", json={"name": name}, headers=admin)
            assert made.status_code == 201, made.text
            token = {"authorization": f"Bearer {made.json()['secret']}"}
            answers = []
            for i in names[lane_id::LANES]:
                reroute = {"reroutes": [f"custom:beta-ep:tenant-model-{i:05d}"]}
                async with writes:
                    await client.patch(f"/admin/v1/orgs/beta/keys/{name}/settings", json=reroute, headers=admin)
                body = {"model": "t-ok", "messages": [{"role": "user", "content": "hi"}]}
                answers.append((await client.post("/v1/chat/completions", json=body, headers=token)).status_code)
            return answers

        started = time.monotonic()
        lanes = await asyncio.gather(*(lane(i) for i in range(LANES)))
        return [s for answers in lanes for s in answers], time.monotonic() - started


def tenant_models_seen(gw: Gateway) -> int:
    """How many distinct tenant model names reached the simulator (through the worker)."""
    log = httpx.get(f"{gw.sim_url}/sim/log", timeout=30).json()
    return len({e.get("model") for e in log if str(e.get("model", "")).startswith("tenant-model-")})


def test_metrics_need_the_token_on_the_ingress_and_the_worker(fleet: tuple[Gateway, int]) -> None:
    gw, port = fleet
    for url in (f"{gw.base_url}/metrics", f"http://127.0.0.1:{port}/metrics"):
        refused = httpx.get(url)
        assert refused.status_code == 401 and refused.json()["error"]["type"] == "authentication_error"
        assert scrape(url).status_code == 200


def test_10000_tenant_chosen_model_names_keep_worker_metrics_and_rss_bounded(fleet: tuple[Gateway, int]) -> None:
    gw, port = fleet
    worker = f"http://127.0.0.1:{port}/metrics"
    warm, _ = asyncio.run(send(gw, range(NAMES, NAMES + 500)))  # warm up: the process's own caches fill
    assert warm.count(200) == len(warm), warm[:10]
    size0, rss0 = len(scrape(worker).content), worker_rss_kib(gw)
    statuses, took_s = asyncio.run(send(gw, range(NAMES)))
    assert statuses.count(200) == NAMES
    text = scrape(worker).text
    size1, rss1 = len(text.encode()), worker_rss_kib(gw)
    seen = tenant_models_seen(gw)
    print(
        f"\n{seen} distinct tenant model names reached the worker in {took_s:.0f} s: worker /metrics "
        f"{size0} -> {size1} bytes, RSS {rss0} -> {rss1} KiB"
    )
    assert seen >= NAMES  # (the warm-up's included)
    assert "tenant-model" not in text and "tenant-model" not in scrape(f"{gw.base_url}/metrics").text
    assert size1 - size0 < 2_000  # no series per name
    assert rss1 - rss0 < 16 * 1024, (rss0, rss1)  # #40's 900 names grew it 9.3 MiB
