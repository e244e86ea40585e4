#!/usr/bin/env python3
"""Health and breaker dynamics of a real local fleet (SPEC §5), one JSON object per scenario.

Each scenario starts its own fleet on 127.0.0.1 — a private redis-server,
the simulator (`turnout sim`, seeded by `--seed`), `--workers` workers and
one ingress — from a YAML file written to a temporary folder, drives it with
the official `openai` SDK (`max_retries=0`: the SDK never retries on its
own) and stops every child process on exit, Ctrl-C and SIGTERM included.
Figures come from the gateway's response headers (`x-turnout-provider`) and
from the simulator's log (`GET /sim/log`: arrival `t_s` and end `ended_s`,
epoch seconds, of every upstream call).

Scenarios (full durations; `--quick` shortens them, see `DURATIONS`):

S1 heal_share      offers A (`down20s`) and B, `order: health`; 5 req/s open
                   loop for 20 s + 60 s; A's share of served requests in the
                   last 30 s.
S2 random_errors   one offer with `fail10`, then one with `fail50`; 300
                   sequential requests each; success share against the best
                   the retry policy allows, 1 - p^(1 + max_retries).
S3 down_then_heal  primary (`down60s`) and secondary, `order: priority`; one
                   request every 4 s for 60 s + 40 s; seconds from healing to
                   the first call the primary serves.
S4 retry_after_3600 A (`429ra3600`) and B, priority; a first request meets
                   the 429, then 1 req/s for 60 s; calls A received after its
                   first 429, and the success share.
S5 tenant_key      org tenant-a's own key for sim-a is revoked (401 from the
                   simulator; key_mode own_only), org tenant-b uses the
                   platform key: 6 requests from tenant-a, then 10 from
                   tenant-b; tenant-b's successes.
S6 recovery_herd   one offer failing 503 until its breaker opens (one client
                   sends until a request reaches no upstream; the harness then
                   drains the unused 503 steps straight at the simulator), then
                   `cap50`; 200 concurrent clients obeying `retry-after-ms` /
                   `Retry-After` for 60 s; upstream calls per second in the
                   10 s after the first upstream success, and the peak.
S7 hung_probe      one offer failing 503 until its breaker opens (as in S6),
                   then answering only after 120 s (the probe hangs); breaker
                   cooldown 5 s; 2 req/s for 130 s; the most upstream calls in
                   flight at once after the trip.

Usage:
    .venv/bin/python bench/health_dynamics.py [--only S1,S3] [--quick]
        [--breaker '{"cooldown_s": 5}'] [--workers 2] [--seed 0] [--keep-logs]

`--breaker` is a JSON object placed under `breaker:` in the YAML, over each
scenario's own defaults (S7: a short cooldown; `--quick`: cooldown 3 s, cap
10 s, so a smoke run shows recoveries). Every loop is bounded in time and in
count; the only address used is 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

from dynamics.fleet import fleet_for, log
from dynamics.scenarios import DURATIONS, SCENARIOS, Durations


def run_scenario(sid: str, args: argparse.Namespace, d: Durations) -> dict[str, Any]:
    """Start a fleet, run scenario `sid` against it, stop the fleet; returns the result object."""
    scenario = SCENARIOS[sid]
    breaker = {**d.breaker, **scenario.breaker(d), **args.breaker}
    d = replace(d, breaker=breaker)
    started = time.monotonic()
    log(f"{sid} {scenario.name}: starting (breaker {json.dumps(breaker)})")
    with fleet_for(scenario.models(d), breaker, args.workers, args.seed, args.keep_logs) as gw:
        figures = asyncio.run(scenario.run(gw, d))
    return {
        "scenario": sid,
        "name": scenario.name,
        "breaker": breaker,
        "seed": args.seed,
        "workers": args.workers,
        "quick": args.quick,
        **figures,
        "wall_s": round(time.monotonic() - started, 1),
    }


def _stop_on_signal(signum: int, frame: object) -> None:
    """SIGINT / SIGTERM / SIGHUP: unwind like Ctrl-C, so every fleet is stopped."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    """Run the chosen scenarios; one JSON line per scenario on stdout. Exit 1 if any failed."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenario ids (S1..S7)")
    parser.add_argument("--quick", action="store_true", help="short durations for a smoke run")
    parser.add_argument("--breaker", type=json.loads, default={}, help="JSON object put under breaker:")
    parser.add_argument("--workers", type=int, default=2, choices=range(1, 5))
    parser.add_argument("--seed", type=int, default=0, help="simulator seed (fail<P> rolls)")
    parser.add_argument("--keep-logs", action="store_true", help="keep each fleet's folder and logs")
    args = parser.parse_args(argv)
    chosen = [s.strip().upper() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SCENARIOS]
    if unknown or not isinstance(args.breaker, dict):
        parser.error(f"unknown scenario(s) {unknown}" if unknown else "--breaker must be a JSON object")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGINT even when started with it ignored
        signal.signal(sig, _stop_on_signal)
    durations = DURATIONS["quick" if args.quick else "full"]
    failed = 0
    for sid in chosen:
        try:
            result = run_scenario(sid, args, durations)
        except KeyboardInterrupt as exc:
            log(f"interrupted ({exc or 'SIGINT'}); every child process is stopped")
            return 130
        except Exception as exc:  # noqa: BLE001 - report and go on with the next scenario
            failed += 1
            result = {"scenario": sid, "name": SCENARIOS[sid].name, "error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(result), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
