#!/usr/bin/env python3
"""Ingress memory with many concurrent open streams.

Starts redis, the fast mock upstream, one worker and one ingress; opens
`--streams` concurrent streaming requests whose upstream sends a chunk every
200 ms (`--chunks` chunks each), samples the ingress RSS while they are all
open, and reports it against the RSS at rest. Bounded: one wave.

Usage: .venv/bin/python bench/stream_rss.py [--streams 500] [--chunks 40]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import httpx
import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from run_gateway_bench import KEY, start

from support.procs import Fleet


async def _stream(client: httpx.AsyncClient, base: str, chunks: int, opened: list[int]) -> int:
    body = {
        "model": "mock-slowstream",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "max_tokens": chunks,
    }
    frames = 0
    async with client.stream("POST", f"{base}/v1/chat/completions", json=body) as response:
        opened.append(response.status_code)
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                frames += 1
    return frames


async def run(base: str, ingress_pid: int, streams: int, chunks: int) -> None:
    proc = psutil.Process(ingress_pid)
    rest = proc.memory_info().rss
    opened: list[int] = []
    limits = httpx.Limits(max_connections=streams + 10)
    async with httpx.AsyncClient(headers={"authorization": f"Bearer {KEY}"}, timeout=120, limits=limits) as client:
        tasks = [asyncio.create_task(_stream(client, base, chunks, opened)) for _ in range(streams)]
        peak = rest
        started = time.monotonic()
        while not all(t.done() for t in tasks) and time.monotonic() - started < 120:
            peak = max(peak, proc.memory_info().rss)
            await asyncio.sleep(0.1)
        results = await asyncio.gather(*tasks, return_exceptions=True)
    ok = sum(1 for r in results if isinstance(r, int) and r >= chunks)
    mib = 1024 * 1024
    print(
        f"{streams} concurrent streams x {chunks} chunks: {ok} complete, "
        f"{sum(1 for s in opened if s == 200)} opened with 200"
    )
    print(
        f"ingress RSS at rest {rest / mib:.1f} MiB, peak with all streams open {peak / mib:.1f} MiB "
        f"(+{(peak - rest) / mib:.1f} MiB, {(peak - rest) / streams / 1024:.0f} KiB per stream)"
    )


def main() -> int:
    """Run the measurement."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--chunks", type=int, default=40)
    parser.add_argument("--yardstick", type=Path, default=HERE.parent.parent / "shared" / "bench")
    args = parser.parse_args()
    fleet = Fleet()
    try:
        base, _, pids = start(fleet, args.yardstick, 1, 500)
        asyncio.run(run(base, pids[0], args.streams, args.chunks))
    finally:
        fleet.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
