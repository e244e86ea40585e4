#!/usr/bin/env python3
"""Throughput with tracing and attempt records on vs off, same machine, interleaved.

Starts on 127.0.0.1, per mode, a private redis-server, one ingress and one
worker routing to a fast mock upstream (the yardstick's `mock_upstream.py`
when present, else Turnout's simulator), then drives each mode in turn with
the same closed-loop load (`--concurrency` requests in flight, `--duration`
seconds, at most `--max-requests`), `--reps` times, interleaved, and prints
requests/s and latency percentiles per mode.

Modes:
    off      no trace exporter (spans unsampled), `records_max: 0`
    default  no trace exporter (spans unsampled), records on (the shipped default)
    full     every span recorded and exported (JSON lines file, batch
             processor), records on, worker metrics port on

Usage:
    .venv/bin/python bench/tracing_overhead.py [--concurrency 50] [--duration 8] [--reps 3] [--modes off,default,full]

Traffic goes to 127.0.0.1 only; every loop is bounded by time and count.
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

from support.procs import Fleet, free_port, http_ok, wait_until

KEY = "tk-bench-tracing-000000001"
CONFIG = """\
providers:
  mock: {{kind: openai_compatible, base_url: "{upstream}/v1", api_key: bench-key}}
models:
  bench: {{offers: [{{provider: mock, model: "{model}", input_usd_per_mtok: 1, output_usd_per_mtok: 2}}]}}
gateway: {{max_queue_depth: 100000, records_max: {records_max}}}
orgs:
  bench:
    keys: [{{name: bench, key: {key}}}]
"""
MODES = {
    "off": ({}, 0),
    "default": ({}, 100_000),
    "full": ({"TURNOUT_TRACE_FILE": "{dir}/spans-{{service}}.jsonl"}, 100_000),
}


def start_upstream(fleet: Fleet, yardstick: Path) -> tuple[str, str]:
    """The mock upstream's base URL and the model name to route to."""
    mock = yardstick / "mock_upstream.py"
    if mock.exists():
        port = free_port()
        fleet.spawn("mock", [sys.executable, str(mock), "--port", str(port)])
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: http_ok(f"{url}/health"), 10, "mock upstream")
        return url, "mock-d0"
    _, url = fleet.sim()
    return url, "bench-ok"


def start_mode(fleet: Fleet, mode: str, upstream: str, model: str) -> str:
    """Start redis, one worker and one ingress for `mode`; return the ingress URL."""
    extra, records_max = MODES[mode]
    _, redis_url = fleet.redis()
    workdir = fleet.workdir / mode
    workdir.mkdir()
    config = workdir / "turnout.yaml"
    config.write_text(CONFIG.format(upstream=upstream, model=model, records_max=records_max, key=KEY))
    env = {k: v.format(dir=workdir) for k, v in extra.items()}
    env["TURNOUT_METRICS_PORT"] = str(free_port()) if mode == "full" else "0"
    fleet.worker(config, redis_url, name=f"worker-{mode}", env=env)
    _, base = fleet.ingress(config, redis_url, env=env)
    return base


async def drive(base: str, concurrency: int, duration_s: float, max_requests: int) -> tuple[int, int, list[float]]:
    """Closed-loop load; returns (ok, failed, latencies in seconds)."""
    latencies: list[float] = []
    failed = 0
    sent = 0
    stop_at = time.monotonic() + duration_s
    body = {"model": "bench", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 16}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(
        base_url=base, headers={"authorization": f"Bearer {KEY}"}, limits=limits, timeout=30
    ) as client:

        async def one_client() -> None:
            nonlocal failed, sent
            while time.monotonic() < stop_at and sent < max_requests:
                sent += 1
                t0 = time.perf_counter()
                response = await client.post("/v1/chat/completions", json=body)
                if response.status_code == 200:
                    latencies.append(time.perf_counter() - t0)
                else:
                    failed += 1

        await asyncio.gather(*(one_client() for _ in range(concurrency)))
    return len(latencies), failed, latencies


def main() -> int:
    """Run the comparison; prints one table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--max-requests", type=int, default=200_000)
    parser.add_argument("--modes", default="off,default,full")
    parser.add_argument("--yardstick", type=Path, default=HERE.parent.parent / "shared" / "bench")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    fleet = Fleet()
    try:
        upstream, model = start_upstream(fleet, args.yardstick)
        bases = {mode: start_mode(fleet, mode, upstream, model) for mode in modes}
        for mode in modes:
            asyncio.run(drive(bases[mode], args.concurrency, args.warmup, args.max_requests))
        results: dict[str, list[tuple[float, list[float], int]]] = {m: [] for m in modes}
        for rep in range(args.reps):
            for mode in modes:
                t0 = time.monotonic()
                ok, failed, lat = asyncio.run(drive(bases[mode], args.concurrency, args.duration, args.max_requests))
                rps = ok / (time.monotonic() - t0)
                results[mode].append((rps, lat, failed))
                print(f"rep {rep + 1} {mode:8s} {rps:8.1f} req/s  failed {failed}", flush=True)
        print(f"\nconcurrency {args.concurrency}, {args.duration:.0f} s x {args.reps} reps, upstream {model}")
        print(f"{'mode':8s} {'req/s (median)':>15s} {'p50 ms':>8s} {'p99 ms':>8s} {'vs off':>8s}")
        baseline = statistics.median(r[0] for r in results[modes[0]])
        for mode in modes:
            rps = statistics.median(r[0] for r in results[mode])
            lat = sorted(x for r in results[mode] for x in r[1])
            p50 = lat[len(lat) // 2] * 1000 if lat else float("nan")
            p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000 if lat else float("nan")
            print(f"{mode:8s} {rps:15.1f} {p50:8.2f} {p99:8.2f} {rps / baseline - 1:+8.1%}")
        return 0
    finally:
        fleet.stop_all()


if __name__ == "__main__":
    sys.exit(main())
