#!/usr/bin/env python3
"""Gateway overhead benchmark: direct-to-upstream vs through Turnout, same run.

Starts on 127.0.0.1: a private redis-server, the fast mock upstream, one
Turnout ingress and N workers routing `mock-d0` / `mock-d50` to the mock; then
runs the side-by-side load generator (direct and through-gateway interleaved)
and prints its table, with the ingress and worker PIDs for RSS / CPU figures.

Usage:
    .venv/bin/python bench/run_gateway_bench.py [--workers 1] [--concurrency 1,50] [--delays 0,50]
        [--modes nonstream] [--duration 8] [--reps 3] [--yardstick DIR] [--json out.json]

`--yardstick` is the folder holding `mock_upstream.py` and `bench_gateway.py`
(default: `../shared/bench` beside the checkout). Every load loop is bounded by
duration and count, and traffic goes to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from support.procs import Fleet, free_port, http_ok, wait_until

KEY = "tk-bench-000000000000000001"

CONFIG = """\
providers:
  mock: {{kind: openai_compatible, base_url: "{mock}/v1", api_key: bench-key}}
models:
  mock-d0:  {{offers: [{{provider: mock, model: mock-d0}}]}}
  mock-d50: {{offers: [{{provider: mock, model: mock-d50}}]}}
  mock-d20000: {{offers: [{{provider: mock, model: mock-d20000}}]}}
  mock-slowstream: {{offers: [{{provider: mock, model: mock-d0-i200}}]}}
gateway: {{max_queue_depth: 100000, worker_max_jobs: {max_jobs}}}
orgs:
  bench:
    keys: [{{name: bench, key: {key}}}]
"""


def start(fleet: Fleet, yardstick: Path, workers: int, max_jobs: int) -> tuple[str, str, list[int]]:
    """Start redis, mock, workers and ingress; return (gateway URL, mock URL, gateway PIDs)."""
    _, redis_url = fleet.redis()
    mock_port = free_port()
    fleet.spawn("mock", [sys.executable, str(yardstick / "mock_upstream.py"), "--port", str(mock_port)])
    mock = f"http://127.0.0.1:{mock_port}"
    wait_until(lambda: http_ok(f"{mock}/health"), 10, "mock upstream")
    config = fleet.workdir / "bench.yaml"
    config.write_text(CONFIG.format(mock=mock, key=KEY, max_jobs=max_jobs))
    pids = [fleet.worker(config, redis_url, name=f"worker-{i}").popen.pid for i in range(workers)]
    ingress, base = fleet.ingress(config, redis_url)
    return base, mock, [ingress.popen.pid, *pids]


def main() -> int:
    """Run the benchmark; returns the load generator's exit code."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--max-jobs", type=int, default=500)
    parser.add_argument("--concurrency", default="1,50")
    parser.add_argument("--delays", default="0,50")
    parser.add_argument("--modes", default="nonstream")
    parser.add_argument("--duration", default="8")
    parser.add_argument("--warmup", default="2")
    parser.add_argument("--reps", default="3")
    parser.add_argument("--yardstick", type=Path, default=HERE.parent.parent / "shared" / "bench")
    parser.add_argument("--json")
    parser.add_argument("--skip-direct", action="store_true", help="gateway runs only (for profiling)")
    args = parser.parse_args()
    if not (args.yardstick / "bench_gateway.py").exists():
        print(f"no load generator at {args.yardstick}; pass --yardstick DIR", file=sys.stderr)
        return 2
    fleet = Fleet()
    try:
        base, mock, pids = start(fleet, args.yardstick, args.workers, args.max_jobs)
        print(f"gateway {base} (pids {pids}), mock {mock}, logs in {fleet.workdir}", flush=True)
        cmd = [
            sys.executable,
            str(args.yardstick / "bench_gateway.py"),
            "--gateway",
            base,
            "--gateway-key",
            KEY,
            "--mock",
            mock,
            "--concurrency",
            args.concurrency,
            "--delays",
            args.delays,
            "--modes",
            args.modes,
            "--duration",
            args.duration,
            "--warmup",
            args.warmup,
            "--reps",
            args.reps,
            "--gateway-pids",
            ",".join(map(str, pids)),
            "--label",
            f"turnout-{args.workers}w",
        ]
        if args.json:
            cmd += ["--json", args.json]
        if args.skip_direct:
            cmd += ["--skip-direct"]
        return subprocess.call(cmd)
    finally:
        fleet.stop_all()


if __name__ == "__main__":
    sys.exit(main())
