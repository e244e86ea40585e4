#!/usr/bin/env python3
"""Fair share between orgs in the queue: org B's latency while org A floods.

Starts Redis, the simulator, one worker with `--slots` job slots and one
ingress; the model answers after `--upstream-ms`. Org B sends `--samples`
requests one at a time on the idle fleet, then again while org A keeps
`--concurrency` requests in flight (far more than the slots, so A's backlog
waits in the queue). Prints B's p50 / p99 in both phases and how many of A's
requests reached the upstream before each of B's (`support.fairness`).
`--one-org` puts both keys in one org: the first-in-first-out control.

Usage: .venv/bin/python bench/fair_share.py [--concurrency 100] [--slots 20] [--one-org]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from support.fairness import CONFIG, KEY_A, KEY_B, ONE_ORG_CONFIG, drive
from support.gateway import start_gateway
from support.procs import Fleet


def main() -> int:
    """Run the measurement."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--slots", type=int, default=20)
    parser.add_argument("--upstream-ms", type=int, default=500)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--one-org", action="store_true", help="both keys in one org (first in first out)")
    args = parser.parse_args()
    fleet = Fleet()
    try:
        gw = start_gateway(
            fleet,
            ONE_ORG_CONFIG if args.one_org else CONFIG,
            key_a=KEY_A,
            key_b=KEY_B,
            slots=str(args.slots),
            upstream_ms=str(args.upstream_ms),
        )
        figures = asyncio.run(drive(gw.base_url, gw.sim_url, concurrency=args.concurrency, samples=args.samples))
        print(
            f"org A keeps {args.concurrency} requests in flight; {args.slots} worker slots; "
            f"upstream {args.upstream_ms} ms{'; both keys in one org' if args.one_org else ''}"
        )
        print(figures.text())
    finally:
        fleet.stop_all()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
