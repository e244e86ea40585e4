"""Shedding at the door: a job that cannot be served within its budget is refused at once.

Its own fleet (Redis, simulator, one worker with 2 slots, one ingress); the
model answers after 1 s. One key of the org has the default 30 s budget, the
other a 2 s budget. While a flood of long-budget requests keeps about ten
jobs waiting (an expected wait of ~5 s on 2 slots of ~1 s jobs), a
short-budget request is answered 503 `queue_full` with `Retry-After` at
once, not after its 2 s budget; the flood is served; on the drained queue
the short-budget key is served. Prints the figures.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Iterator

import httpx
import pytest
import redis

from support.gateway import BREAKER_OFF, Gateway, start_gateway
from support.procs import Fleet, require_redis, wait_until
from turnout.state import keys

pytestmark = pytest.mark.integration

KEY_LONG = "tk-test-door-long-0000001"
KEY_SHORT = "tk-test-door-short-000001"
FLOOD = 14

CONFIG = (
    """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
models:
  slow: {{offers: [{{provider: sim-a, model: "door~200+1000ms"}}]}}
gateway: {{worker_max_jobs: 2}}
"""
    + BREAKER_OFF
    + """
orgs:
  acme:
    keys:
      - {{name: long, key: {key_long}}}
      - {{name: short, key: {key_short}, settings: {{policy: {{budget: {{max_total_latency_ms: 2000}}}}}}}}
"""
)


@pytest.fixture(scope="module")
def door_gw() -> Iterator[Gateway]:
    require_redis()
    fleet = Fleet()
    try:
        yield start_gateway(fleet, CONFIG, key_long=KEY_LONG, key_short=KEY_SHORT)
    finally:
        fleet.stop_all()


async def _ask(client: httpx.AsyncClient, gw: Gateway, key: str) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = await client.post(
        f"{gw.base_url}/v1/chat/completions",
        headers={"authorization": f"Bearer {key}"},
        json={"model": "slow", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
    )
    return response, time.monotonic() - started


def _waiting(gw: Gateway) -> int:
    with redis.Redis.from_url(gw.redis_url) as r:
        return int(r.zcard(keys.fair_org_key("acme")))


def _served_once(gw: Gateway) -> bool:
    with redis.Redis.from_url(gw.redis_url) as r:
        beats = [v.decode().split(":") for v in r.hvals(keys.FLEET_WORKERS)]
    return any(float(service_ms) > 0 for _, service_ms, _ in beats)


async def _scenario(gw: Gateway) -> tuple[list[tuple[httpx.Response, float]], list[tuple[httpx.Response, float]]]:
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=FLOOD + 4)) as client:
        flood = [asyncio.create_task(_ask(client, gw, KEY_LONG)) for _ in range(FLOOD)]
        deadline = time.monotonic() + 10
        while _waiting(gw) < 10 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        short: list[tuple[httpx.Response, float]] = []
        while time.monotonic() < deadline and _waiting(gw) >= 6:  # ≥ 6 ahead on 2 slots of ~1 s jobs: ~3 s > 2 s
            answer = await _ask(client, gw, KEY_SHORT)
            short.append(answer)
            if answer[0].status_code == 503 and len(short) >= 3:
                break
            await asyncio.sleep(0.1)
        return await asyncio.gather(*flood), short


def test_a_short_budget_is_shed_at_once_while_the_queue_is_long_and_the_rest_is_served(door_gw: Gateway) -> None:
    gw = door_gw
    asyncio.run(_warm_up(gw))  # the worker has served jobs: the fleet's service time is known
    wait_until(lambda: _served_once(gw), 10, "a heartbeat with a service time")  # the ingress reads it within 1 s
    flood, short = asyncio.run(_scenario(gw))
    shed = [(r, s) for r, s in short if r.status_code == 503 and r.json()["error"]["code"] == "queue_full"]
    print(
        f"\nflood: {sorted({r.status_code for r, _ in flood})} x{len(flood)}; short-budget while queued: "
        f"{[(r.status_code, r.headers.get('retry-after'), round(s, 3)) for r, s in short]}"
    )
    assert shed, "no short-budget request was shed while ~10 jobs waited"
    for response, elapsed in shed:
        assert response.json()["error"]["code"] == "queue_full"
        assert int(response.headers["retry-after"]) >= 1
        assert elapsed < 1.5  # at the door, not after its 2 s budget (503 no_worker)
    assert all(r.status_code == 200 for r, _ in flood)
    wait_until(lambda: _waiting(gw) == 0, 20, "the queue drained")
    [(after, _)] = asyncio.run(_one_short(gw))
    assert after.status_code == 200  # an empty queue is never shed


async def _warm_up(gw: Gateway) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        assert all(
            r.status_code == 200 for r, _ in await asyncio.gather(*[_ask(client, gw, KEY_LONG) for _ in range(2)])
        )


async def _one_short(gw: Gateway) -> list[tuple[httpx.Response, float]]:
    async with httpx.AsyncClient(timeout=30) as client:
        return [await _ask(client, gw, KEY_SHORT)]


async def _staggered(gw: Gateway, count: int, gap_s: float) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=60) as client:
        tasks = []
        for _ in range(count):
            tasks.append(asyncio.create_task(_ask(client, gw, KEY_LONG)))
            await asyncio.sleep(gap_s)  # spacing only orders the arrivals; nothing is timed against it
        return [r for r, _ in await asyncio.gather(*tasks)]


def test_under_a_backlog_jobs_reach_the_upstream_oldest_first(door_gw: Gateway) -> None:
    gw = door_gw
    wait_until(lambda: _waiting(gw) == 0, 20, "an idle queue")
    seen_before = {a["request_id"] for a in gw.sim_log("door~200+1000ms")}
    responses = asyncio.run(_staggered(gw, 10, 0.05))
    sent = [r.headers["x-request-id"] for r in responses]
    calls = sorted(
        (a for a in gw.sim_log("door~200+1000ms") if a["request_id"] not in seen_before),
        key=lambda a: int(a["seq"]),  # type: ignore[call-overload]
    )
    upstream = [str(a["request_id"]) for a in calls]
    overtakes = [
        sum(1 for later in sent[i + 1 :] if upstream.index(later) < upstream.index(job)) for i, job in enumerate(sent)
    ]
    # a freed slot is filled from the doorbell at once: the next call starts right after an earlier one ends
    ends = sorted(float(a["ended_s"]) for a in calls)  # type: ignore[arg-type]
    gaps = [
        float(a["t_s"]) - max(e for e in ends if e <= float(a["t_s"]))  # type: ignore[arg-type]
        for a in calls[2:]
    ]
    print(
        f"\n10 requests on 2 slots: upstream order {[sent.index(j) for j in upstream]}; slot refilled in "
        f"median {statistics.median(gaps) * 1000:.0f} ms, max {max(gaps) * 1000:.0f} ms"
    )
    assert sorted(upstream) == sorted(sent)
    assert max(overtakes) <= 1  # two slots fill together: at most its slot-mate goes first, never a later backlog
    assert statistics.median(gaps) < 0.5  # not left to the 1 s scan (a lost wakeup)
