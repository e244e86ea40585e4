#!/usr/bin/env python3
"""The load and the counters of `scale.py`, run inside its client namespace.

    closed_loop.py --base URL --key KEY --redis-url URL --pids ingress=PID --pids workers=PID,PID
                   [--model mock-d0] [--concurrency 50] [--duration 8] [--warmup 2] [--reps 3]
                   [--pause 1] [--max-requests 200000] [--idle 3] [--count 20]

Closed loop: `--concurrency` lanes on keep-alive connections (aiohttp), each
sending the next non-streaming chat completion as soon as the previous one is
answered. A warm-up of `--warmup` s, then `--reps` measured windows of
`--duration` s: before and after each, the CPU seconds of every role's
processes and their descendants (`/proc/PID/stat` utime + stime; the pid
namespace is the machine's, only the network is private) and Redis's `INFO
cpu commandstats`. A window ends when its time is up and its lanes' last
requests are answered (each bounded by a 30 s timeout), so the counters cover
exactly the requests it counts. Then an idle window of `--idle` s (no
requests): the same counters, for each role's own CPU rate. `INFO commandstats` counts the commands a
Lua script runs as well as the script's own `EVALSHA`; so afterwards
`--count` sequential requests are counted with `MONITOR`
(`tests/support/redis_count.py`, as `bench/perf_table.py` does): the commands
the clients send per request (an `EVALSHA` once) and, apart, those run
inside scripts. Prints one JSON document on stdout:
{"windows": [{"elapsed_s", "ok", "errors", "cpu_s": {role: s}, "redis_cpu_s",
"commands": {name: calls}, "client_cpu_s"}, ...], "idle": {the same keys},
"sequential": {"client",
"inside_scripts", "breakdown"}}. Every loop is bounded by time,
`--max-requests` and `--count`; the only addresses are the ones passed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent.parent / "tests"))

from perf_table import chat_sender, proc_tree_stats

from support.redis_count import commands_per_request


def redis_counters(client: redis.Redis) -> tuple[float, dict[str, int]]:
    """(Redis CPU seconds user + sys, calls per command) from one `INFO cpu commandstats`."""
    info: dict[str, Any] = client.execute_command("INFO", "cpu", "commandstats")  # type: ignore[no-untyped-call]
    calls = {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in info.items() if name.startswith("cmdstat_")}
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"]), calls


async def closed_loop(
    session: aiohttp.ClientSession, url: str, body: bytes, concurrency: int, duration_s: float, max_requests: int
) -> tuple[int, int]:
    """Run the lanes for `duration_s` (at most `max_requests` started); (answered 200, other outcomes)."""
    stop_at = time.monotonic() + duration_s
    counts = [0, 0]

    async def lane() -> None:
        while time.monotonic() < stop_at and counts[0] + counts[1] < max_requests:
            try:
                async with session.post(url, data=body) as response:
                    await response.read()
                    counts[0 if response.status == 200 else 1] += 1
            except (TimeoutError, aiohttp.ClientError):
                counts[1] += 1

    await asyncio.wait_for(asyncio.gather(*[lane() for _ in range(concurrency)]), duration_s + 60)
    return counts[0], counts[1]


def cpu_by_role(pids: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds (utime + stime) of every role's processes and their descendants."""
    return {role: proc_tree_stats(role_pids)[1] for role, role_pids in pids.items()}


def client_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """The warm-up and the measured windows (see the module's docstring)."""
    pids = {role: [int(p) for p in csv.split(",")] for role, csv in (item.split("=", 1) for item in args.pids)}
    url = f"{args.base}/v1/chat/completions"
    body = json.dumps({"model": args.model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16}).encode()
    headers = {"authorization": f"Bearer {args.key}", "content-type": "application/json"}
    windows: list[dict[str, Any]] = []
    connector = aiohttp.TCPConnector(limit=args.concurrency)
    timeout = aiohttp.ClientTimeout(total=30)
    with redis.Redis.from_url(args.redis_url) as client:
        async with aiohttp.ClientSession(connector=connector, headers=headers, timeout=timeout) as session:
            await closed_loop(session, url, body, args.concurrency, args.warmup, args.max_requests)
            for _ in range(args.reps):
                await asyncio.sleep(args.pause)
                before = Counters.read(client, pids)
                ok, errors = await closed_loop(session, url, body, args.concurrency, args.duration, args.max_requests)
                windows.append(Counters.read(client, pids).since(before, ok, errors))
        await asyncio.sleep(args.pause)
        before = Counters.read(client, pids)
        await asyncio.sleep(args.idle)
        idle = Counters.read(client, pids).since(before, 0, 0)
    return {"windows": windows, "idle": idle, "sequential": sequential(args)}


@dataclass(frozen=True)
class Counters:
    """The counters at one moment: monotonic s, CPU s by role, this process's CPU s, Redis CPU s, Redis calls."""

    at: float
    cpu_s: dict[str, float]
    client_cpu_s: float
    redis_cpu_s: float
    calls: dict[str, int]

    @classmethod
    def read(cls, client: redis.Redis, pids: dict[str, list[int]]) -> Counters:
        """Read them all (one `INFO`)."""
        redis_cpu_s, calls = redis_counters(client)
        return cls(time.monotonic(), cpu_by_role(pids), client_cpu_s(), redis_cpu_s, calls)

    def since(self, before: Counters, ok: int, errors: int) -> dict[str, Any]:
        """The window from `before` to these counters, as `scale_figures.Window`'s fields."""
        commands = {name: n - before.calls.get(name, 0) for name, n in self.calls.items()}
        commands["info"] = commands.get("info", 0) - 1  # the INFO that opened the window
        return {
            "elapsed_s": self.at - before.at,
            "ok": ok,
            "errors": errors,
            "cpu_s": {role: self.cpu_s[role] - before.cpu_s[role] for role in self.cpu_s},
            "redis_cpu_s": self.redis_cpu_s - before.redis_cpu_s,
            "commands": {name: n for name, n in commands.items() if n > 0},
            "client_cpu_s": self.client_cpu_s - before.client_cpu_s,
        }


def sequential(args: argparse.Namespace) -> dict[str, Any]:
    """Client commands and commands inside scripts of one request, the fewest over `--count` sequential ones."""
    counted = commands_per_request(args.redis_url, chat_sender(args.base, args.key, args.model), n=args.count)
    return {
        "client": counted.fewest,
        "inside_scripts": counted.fewest_inside_scripts,
        "breakdown": dict(counted.breakdown),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="closed_loop.py", description=__doc__)
    parser.add_argument("--base", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--pids", action="append", default=[], help="ROLE=PID[,PID...]")
    parser.add_argument("--model", default="mock-d0")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--pause", type=float, default=1.0)
    parser.add_argument("--max-requests", type=int, default=200_000, help="cap per window (and for the warm-up)")
    parser.add_argument("--idle", type=float, default=3.0, help="seconds of the idle window")
    parser.add_argument("--count", type=int, default=20, help="sequential requests counted with MONITOR")
    args = parser.parse_args(argv)
    if not (
        0 < args.duration <= 60
        and 0 <= args.warmup <= 60
        and 1 <= args.reps <= 20
        and 1 <= args.concurrency <= 1000
        and 1 <= args.count <= 200
        and 0 < args.idle <= 60
    ):
        parser.error(
            "bounded runs only: --duration 0..60 s, --warmup 0..60 s, --reps 1..20, --concurrency 1..1000, --count 1..200, "
            "--idle 0..60 s"
        )
    print(json.dumps(asyncio.run(run(args))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
