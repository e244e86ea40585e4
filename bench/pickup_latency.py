#!/usr/bin/env python3
"""Pickup latency with many long jobs in flight on one worker.

Starts redis, the fast mock upstream, one worker (max_jobs above the load) and
one ingress; measures N sequential short requests (`mock-d0`) first on an idle
fleet, then again while `--inflight` long requests (`mock-d20000`, 20 s
upstream) hold the worker busy. The difference is what queue pickup and
bookkeeping cost under that load. Bounded: one long wave, N short requests.

Usage: .venv/bin/python bench/pickup_latency.py [--inflight 1000] [--requests 300]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from run_gateway_bench import KEY, start

from support.procs import Fleet

BODY = {"model": "mock-d0", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16}


async def _sequential(client: httpx.AsyncClient, base: str, count: int) -> list[float]:
    latencies = []
    for _ in range(count):
        started = time.perf_counter()
        response = await client.post(f"{base}/v1/chat/completions", json=BODY)
        response.raise_for_status()
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def _queue_depth(base: str) -> float:
    for line in httpx.get(f"{base}/metrics").text.splitlines():
        if line.startswith("turnout_queue_depth "):
            return float(line.split()[1])
    return float("nan")


def _describe(name: str, values: list[float]) -> str:
    values = sorted(values)
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return f"{name:<10} p50={statistics.median(values):7.2f} ms  p99={p99:7.2f} ms  n={len(values)}"


async def run(base: str, inflight: int, count: int) -> None:
    headers = {"authorization": f"Bearer {KEY}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=60) as short,
        httpx.AsyncClient(headers=headers, timeout=60, limits=httpx.Limits(max_connections=inflight + 10)) as long,
    ):
        await _sequential(short, base, 50)  # warm-up
        idle = await _sequential(short, base, count)
        body = {**BODY, "model": "mock-d20000"}
        wave = [asyncio.create_task(long.post(f"{base}/v1/chat/completions", json=body)) for _ in range(inflight)]
        await asyncio.sleep(3.0)  # let every long job be picked up
        depth_before = _queue_depth(base)
        loaded = await _sequential(short, base, count)
        print(f"jobs in flight during the loaded run: {depth_before:.0f} -> {_queue_depth(base):.0f}")
        print(_describe("idle", idle))
        print(_describe(f"{inflight} busy", loaded))
        print(f"added p50 = {statistics.median(loaded) - statistics.median(idle):.2f} ms")
        finished = [t for t in wave if t.done()]
        if finished:
            kinds = {}
            for t in finished:
                exc = t.exception()
                key = type(exc).__name__ if exc else str(t.result().status_code)
                kinds[key] = kinds.get(key, 0) + 1
            print(f"warning: {len(finished)} long requests ended early: {kinds}")
        for task in wave:
            task.cancel()
        await asyncio.gather(*wave, return_exceptions=True)


def main() -> int:
    """Run the measurement."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inflight", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--yardstick", type=Path, default=HERE.parent.parent / "shared" / "bench")
    args = parser.parse_args()
    fleet = Fleet()
    try:
        base, _, pids = start(fleet, args.yardstick, 1, args.inflight + 200)
        print(f"gateway {base} pids {pids}")
        asyncio.run(run(base, args.inflight, args.requests))
    finally:
        fleet.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
