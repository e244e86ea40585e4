#!/usr/bin/env python3
"""What grows in a worker's memory with tenant-chosen model names (issue #40), and by how much.

Starts the tenancy fleet (Redis, simulator, one worker, one ingress; `tests/support/tenancy.py`)
with the worker able to count its live objects (`bench/memtrace/sitecustomize.py`), reaches the
worker with `--warm` then `--names` distinct `custom:beta-ep:tenant-model-<i>` names (one key
reroute and one request each, as `tests/integration/test_bounded_metrics.py` does) in `--waves`
waves, and prints after each the worker's RSS and the object types whose live count grew most.

Usage: .venv/bin/python bench/worker_memory.py [--names 3000] [--warm 300] [--waves 1] [--top 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent / "tests" / "integration"))

from test_bounded_metrics import send, worker_rss_kib

from support.gateway import Gateway
from support.tenancy import tenancy_env, tenancy_fleet


def _census(gw: Gateway, out: Path, n: int) -> dict[str, list[int]]:
    """Ask the worker for census `n` (SIGUSR2): type -> [live objects, shallow bytes]."""
    pid = next(p.popen.pid for p in gw.fleet.procs if p.name == "worker-0")
    os.kill(pid, signal.SIGUSR2)
    done = out / f"census-{n}.done"
    deadline = time.monotonic() + 120
    while not done.exists():
        if time.monotonic() > deadline:
            raise TimeoutError("the worker wrote no census")
        time.sleep(0.2)
    counts: dict[str, list[int]] = json.loads((out / f"census-{n}.json").read_text())
    return counts


def _report(before: dict[str, list[int]], after: dict[str, list[int]], names: int, top: int) -> None:
    """Print the live objects' growth between two censuses, the types that grew most first."""
    grown = {k: (v[0] - before.get(k, [0, 0])[0], v[1] - before.get(k, [0, 0])[1]) for k, v in after.items()}
    total = sum(size for _, size in grown.values())
    print(f"  live objects' shallow size: {total / 1024:+.0f} KiB ({total / max(1, names):.0f} B per name)")
    print("  types that grew most (objects, shallow KiB, live after):")
    for name, (count, size) in sorted(grown.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"    {count:+8d} {size / 1024:+9.1f} {after[name][0]:8d}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=3000)
    parser.add_argument("--warm", type=int, default=300)
    parser.add_argument("--waves", type=int, default=1, help="send the names in this many waves, a census after each")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="turnout-memtrace-"))
    path = os.pathsep.join(filter(None, [str(HERE / "memtrace"), os.environ.get("PYTHONPATH")]))
    env = tenancy_env() | {"TURNOUT_MEMTRACE_DIR": str(out), "PYTHONPATH": path}
    with tenancy_fleet(env) as gw:
        first = 100_000
        warm, _ = asyncio.run(send(gw, range(first, first + args.warm)))
        assert warm.count(200) == len(warm), warm[:10]
        census, rss = _census(gw, out, 0), worker_rss_kib(gw)
        print(f"after a {args.warm}-name warm-up: worker RSS {rss / 1024:.1f} MiB")
        size = args.names // args.waves
        for wave in range(args.waves):
            statuses, took_s = asyncio.run(send(gw, range(wave * size, (wave + 1) * size)))
            now, rss_now = _census(gw, out, wave + 1), worker_rss_kib(gw)
            print(
                f"wave {wave + 1}: {statuses.count(200)}/{size} served in {took_s:.0f} s; worker RSS "
                f"{rss / 1024:.1f} -> {rss_now / 1024:.1f} MiB ({(rss_now - rss) / 1024:+.1f} MiB)"
            )
            _report(census, now, size, args.top)
            census, rss = now, rss_now


if __name__ == "__main__":
    main()
