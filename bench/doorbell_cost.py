#!/usr/bin/env python3
"""What one queued request costs the fleet: Redis commands and CPU, with 1 and 2 workers.

Starts on 127.0.0.1, per worker count: a private redis-server, the fast mock
upstream (`mock-d0` answers at once), `W` workers and one ingress; sends
`--warmup` requests, then `--requests` non-streaming requests `--concurrency`
at a time, and prints per request: the Redis commands (from `INFO
commandstats` deltas: all calls, `evalsha`, the doorbell waits (`blpop` column: `BLMOVE`, `BLPOP` before), `publish`; commands run
inside scripts are counted by Redis too) and the CPU time (`/proc` utime +
stime deltas) of the workers, the ingress and redis-server; the workers'
CPU also net of their idle rate (their timers: scan, heartbeat, lease
renewal), measured over `--idle-s` after the load. A wake-all
doorbell shows as commands and worker CPU growing with the worker count.
Bounded: one fleet per worker count, a fixed number of requests.

Usage: .venv/bin/python bench/doorbell_cost.py [--workers 1,2] [--requests 2000] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import httpx
import psutil
import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from run_gateway_bench import KEY, start

from support.procs import Fleet

BODY = {"model": "mock-d0", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


def _commandstats(client: redis.Redis) -> dict[str, int]:
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


def _cpu_s(pids: list[int]) -> float:
    return sum(sum(psutil.Process(pid).cpu_times()[:2]) for pid in pids)


async def _load(base: str, count: int, concurrency: int) -> int:
    todo = iter(range(count))
    ok = 0

    async def lane(client: httpx.AsyncClient) -> None:
        nonlocal ok
        for _ in todo:
            response = await client.post(f"{base}/v1/chat/completions", json=BODY)
            ok += response.status_code == 200

    async with httpx.AsyncClient(headers={"authorization": f"Bearer {KEY}"}, timeout=30) as client:
        await asyncio.wait_for(asyncio.gather(*[lane(client) for _ in range(concurrency)]), 600)
    return ok


def _measure(workers: int, args: argparse.Namespace) -> dict[str, float]:
    fleet = Fleet()
    try:
        base, _, pids = start(fleet, args.yardstick, workers, args.max_jobs)
        ingress_pid, worker_pids = pids[0], pids[1:]
        redis_proc = next(p for p in fleet.procs if p.name.startswith("redis"))
        port = redis_proc.name.split("-")[1]
        client = redis.Redis(host="127.0.0.1", port=int(port))
        asyncio.run(_load(base, args.warmup, args.concurrency))
        before = _commandstats(client)
        cpu_before = {
            k: _cpu_s(v)
            for k, v in {"workers": worker_pids, "ingress": [ingress_pid], "redis": [redis_proc.popen.pid]}.items()
        }
        started = time.perf_counter()
        ok = asyncio.run(_load(base, args.requests, args.concurrency))
        elapsed = time.perf_counter() - started
        after = _commandstats(client)
        cpu_after = {
            k: _cpu_s(v)
            for k, v in {"workers": worker_pids, "ingress": [ingress_pid], "redis": [redis_proc.popen.pid]}.items()
        }
        idle_before = _cpu_s(worker_pids)
        time.sleep(args.idle_s)  # the workers' own chores (scan, heartbeat, lease renewal) without requests
        idle_ms_per_s = (_cpu_s(worker_pids) - idle_before) * 1000 / args.idle_s
        client.close()
    finally:
        fleet.stop_all()
    n = args.requests
    delta = {name: after.get(name, 0) - before.get(name, 0) for name in after}
    delta["info"] = delta.get("info", 0) - 1  # this script's own INFO
    row = {
        "workers": workers,
        "ok": ok,
        "req_s": n / elapsed,
        "cmds": sum(delta.values()) / n,
        "evalsha": delta.get("evalsha", 0) / n,
        "blpop": (delta.get("blpop", 0) + delta.get("blmove", 0)) / n,  # the doorbell's wait: BLMOVE since it picks too
        "publish": delta.get("publish", 0) / n,
    }
    row.update({f"cpu_{k}_ms": (cpu_after[k] - cpu_before[k]) * 1000 / n for k in cpu_before})
    row["cpu_workers_net_ms"] = row["cpu_workers_ms"] - idle_ms_per_s * elapsed / n
    row["idle_ms_s"] = idle_ms_per_s
    if args.detail:
        print(
            f"workers={workers}: "
            + ", ".join(
                f"{name} {calls / n:.2f}" for name, calls in sorted(delta.items(), key=lambda kv: -kv[1]) if calls
            )
        )
    return row


def main() -> int:
    """Run the measurement and print one row per worker count."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--max-jobs", type=int, default=50)
    parser.add_argument("--idle-s", type=float, default=3.0, help="idle window for the workers' own CPU rate")
    parser.add_argument("--detail", action="store_true", help="print every command's calls per request")
    parser.add_argument("--yardstick", type=Path, default=HERE.parent.parent / "shared" / "bench")
    args = parser.parse_args()
    rows = [_measure(int(w), args) for w in args.workers.split(",")]
    print(
        f"{'workers':>7} {'ok':>6} {'req/s':>7} {'cmds/req':>9} {'evalsha':>8} {'blpop':>6} {'publish':>8} "
        f"{'worker CPU ms':>14} {'(net of idle)':>14} {'ingress CPU ms':>15} {'redis CPU ms':>13} {'idle ms/s':>10}"
    )
    for r in rows:
        print(
            f"{r['workers']:>7} {r['ok']:>6} {r['req_s']:>7.0f} {r['cmds']:>9.2f} {r['evalsha']:>8.2f} "
            f"{r['blpop']:>6.2f} {r['publish']:>8.2f} {r['cpu_workers_ms']:>14.3f} {r['cpu_workers_net_ms']:>14.3f} "
            f"{r['cpu_ingress_ms']:>15.3f} {r['cpu_redis_ms']:>13.3f} {r['idle_ms_s']:>10.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
