#!/usr/bin/env python3
"""What a round trip costs Redis: the same commands sent one per round trip and 100 per pipeline.

Starts a private redis-server on 127.0.0.1 (AOF on, as Turnout runs it) and
sends `--calls` of each command below from one client, first each alone (one
round trip each), then in pipelines of `--batch`; prints Redis's own CPU per
call (µs, `INFO cpu`, user + system) for both. The gap between the two
columns is what Redis spends per round trip rather than per command: the
figure behind sharing round trips (`turnout.state.script_batch`).

Usage: .venv/bin/python bench/redis_round_trip.py [--calls 5000] [--batch 100]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from support.procs import Fleet

JOB = b"x" * 1300
"""About a chat job's envelope (bytes)."""


def cpu_us(client: redis.Redis) -> float:
    """Redis's CPU so far, µs (user + system)."""
    info = client.info("cpu")
    return 1e6 * (float(info["used_cpu_user"]) + float(info["used_cpu_sys"]))


def per_call(client: redis.Redis, send: Callable[[Any, int], None], calls: int, batch: int) -> float:
    """Redis CPU per call (µs) of `calls` calls of `send`, `batch` per round trip."""
    pipe = client.pipeline(transaction=False)
    before = cpu_us(client)
    for i in range(calls):
        send(pipe, i)
        if i % batch == batch - 1:
            pipe.execute()
    pipe.execute()
    return (cpu_us(client) - before) / calls


def main() -> int:
    """Measure and print; 0 on success."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args()
    fleet = Fleet()
    try:
        _, url = fleet.redis()
        client = redis.Redis.from_url(url)
        one = client.register_script("return 1")
        store = client.register_script("redis.call('psetex', KEYS[1], ARGV[2], ARGV[1]) return 1")
        zadd = client.register_script("redis.call('zadd', KEYS[1], ARGV[1], ARGV[2]) return 1")
        cases: list[tuple[str, Callable[[Any, int], None]]] = [
            ("PING", lambda p, i: p.ping()),
            ("EVALSHA of `return 1`", lambda p, i: one(keys=[], args=[], client=p)),
            ("ZADD", lambda p, i: p.zadd("z", {f"m{i}": i})),
            ("EVALSHA of one ZADD", lambda p, i: zadd(keys=["zs"], args=[i, f"m{i}"], client=p)),
            ("PSETEX of 1.3 KB", lambda p, i: p.psetex(f"k{i}", 60_000, JOB)),
            ("EVALSHA of one PSETEX of 1.3 KB", lambda p, i: store(keys=[f"j{i}"], args=[JOB, 60_000], client=p)),
        ]
        print(f"| command | alone (µs of Redis CPU per call) | {args.batch} per pipeline |\n|---|---|---|")
        for name, send in cases:
            alone = per_call(client, send, args.calls, 1)
            piped = per_call(client, send, args.calls, args.batch)
            print(f"| {name} | {alone:.1f} | {piped:.1f} |")
        return 0
    finally:
        fleet.stop_all()


if __name__ == "__main__":
    sys.exit(main())
