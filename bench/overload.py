#!/usr/bin/env python3
"""Overload: three times the fleet's capacity for a minute; admitted requests' p99 against the bound.

Starts on 127.0.0.1 Redis, the simulator, one worker with `--slots` job
slots and one ingress; the model answers after `--upstream-ms`, so the
capacity is `slots / upstream` requests per second. The gateway key's
budget is `--budget-ms`. First the service time is measured on the idle
fleet; then requests arrive open loop (evenly spaced) at `--factor` ×
capacity for `--duration` seconds. Prints how many were admitted (200) and
shed (503 `queue_full`, with the latency of the refusal), the admitted
requests' p50 / p99 / max, and the queue-depth bound on an admitted
request's latency: the wait the door admits at most (`min(budget, depth
limit × service / slots)`) plus one service time. The issue's target is
admitted p99 ≤ 2 × that bound (pickup oldest first, shedding at the door).
Bounded: a fixed arrival count, every request with a client timeout.

Usage: .venv/bin/python bench/overload.py [--duration 60] [--factor 3] [--slots 4] [--upstream-ms 500]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from support.gateway import BREAKER_OFF, start_gateway
from support.procs import Fleet

KEY = "tk-bench-overload-0000001"

CONFIG = (
    """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
models:
  slow: {{offers: [{{provider: sim-a, model: "ovl~200+{upstream_ms}ms"}}]}}
gateway: {{worker_max_jobs: {slots}, max_queue_depth: {depth}}}
policy:
  budget: {{max_total_latency_ms: {budget_ms}}}
"""
    + BREAKER_OFF
    + """
orgs:
  acme:
    keys: [{{name: main, key: {key}}}]
"""
)

BODY = {"model": "slow", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _one(client: httpx.AsyncClient, base: str) -> tuple[int, str, float]:
    started = time.monotonic()
    try:
        response = await client.post(f"{base}/v1/chat/completions", json=BODY)
    except httpx.HTTPError as exc:
        return 0, type(exc).__name__, time.monotonic() - started
    code = "" if response.status_code == 200 else response.json().get("error", {}).get("code", "")
    return response.status_code, code, time.monotonic() - started


async def _idle_service_s(client: httpx.AsyncClient, base: str, count: int) -> float:
    return statistics.median([(await _one(client, base))[2] for _ in range(count)])


async def _drive(base: str, rate: float, duration_s: float, timeout_s: float) -> list[tuple[int, str, float]]:
    limits = httpx.Limits(max_connections=int(rate * timeout_s) + 50)
    async with httpx.AsyncClient(
        headers={"authorization": f"Bearer {KEY}"}, timeout=timeout_s, limits=limits
    ) as client:
        total = int(rate * duration_s)
        started = time.monotonic()
        tasks = []
        for i in range(total):
            delay = started + i / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(_one(client, base)))
        return list(await asyncio.gather(*tasks))


def main() -> int:
    """Run the measurement and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--factor", type=float, default=3.0)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--upstream-ms", type=int, default=500)
    parser.add_argument("--budget-ms", type=int, default=5000)
    parser.add_argument("--depth", type=int, default=10_000, help="gateway.max_queue_depth")
    args = parser.parse_args()
    fleet = Fleet()
    try:
        gw = start_gateway(
            fleet,
            CONFIG,
            key=KEY,
            slots=str(args.slots),
            upstream_ms=str(args.upstream_ms),
            budget_ms=str(args.budget_ms),
            depth=str(args.depth),
        )

        async def idle() -> float:
            async with httpx.AsyncClient(headers={"authorization": f"Bearer {KEY}"}, timeout=30) as client:
                return await _idle_service_s(client, gw.base_url, 10)

        service_s = asyncio.run(idle())
        time.sleep(2.5)  # a heartbeat with the service time, and the ingress's read of it
        capacity = args.slots / service_s
        rate = args.factor * capacity
        print(
            f"service time {service_s * 1000:.0f} ms, {args.slots} slots: capacity {capacity:.1f} req/s; "
            f"offering {rate:.1f} req/s for {args.duration:.0f} s"
        )
        results = asyncio.run(_drive(gw.base_url, rate, args.duration, args.budget_ms / 1000 + 10))
    finally:
        fleet.stop_all()
    statuses = Counter((status, code) for status, code, _ in results)
    admitted = [s for status, _, s in results if status == 200]
    shed = [s for status, code, s in results if status == 503 and code == "queue_full"]
    bound_s = min(args.budget_ms / 1000, args.depth * service_s / args.slots) + service_s
    print(f"answers: {dict(statuses)}")
    print(
        f"shed (503 queue_full): {len(shed)}, refused in p50 {_p(shed, 0.5) * 1000:.0f} ms / "
        f"p99 {_p(shed, 0.99) * 1000:.0f} ms"
        if shed
        else "shed: none"
    )
    print(
        f"admitted (200): {len(admitted)} = {len(admitted) / args.duration:.1f} req/s; latency p50 "
        f"{_p(admitted, 0.5):.2f} s, p99 {_p(admitted, 0.99):.2f} s, max {max(admitted):.2f} s"
    )
    queued = [s for status, code, s in results if not (status == 503 and code == "queue_full")]
    print(
        f"every request past the door (200, 504, no_worker): {len(queued)}, p99 {_p(queued, 0.99):.2f} s, "
        f"max {max(queued):.2f} s"
    )
    print(
        f"queue-depth bound {bound_s:.2f} s; admitted p99 = {_p(admitted, 0.99) / bound_s:.2f} x bound, "
        f"past-the-door p99 = {_p(queued, 0.99) / bound_s:.2f} x bound (target <= 2)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
