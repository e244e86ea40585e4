"""What a key with limits and a hard budget costs over a plain key: CPU per queued request and Redis commands.

One fleet (Redis, the yardstick's mock, one worker, one ingress) with the two keys of the
performance table's variants (`perf_variants.CONFIG`: a plain key, and a key with `rpm`, `tpm`,
`max_concurrent` and a hard daily budget, all far above what the run reaches). First the Redis
commands of one queued request of each key (`support.redis_count`, the fewest over `--count`
sequential requests: client commands and, apart, those Lua scripts ran inside); then the two keys
loaded in turn at c=50, 0 ms, non-streaming, `--reps` times (in turn: they share the machine's
moments), CPU per answered request of the ingress, the worker and Redis from the processes' own
counters. Prints medians and the limited key's difference. Traffic goes to 127.0.0.1 only.

    .venv/bin/python bench/admission_cost.py [--reps 3 --duration 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

import perf_table
import perf_variants

from support.procs import Fleet, free_port, http_ok, wait_until
from support.redis_count import commands_per_request

KEYS = {"plain": perf_variants.PLAIN_KEY, "limits": perf_variants.LIMITED_KEY}


def main() -> None:
    """Run the comparison (module doc) and print it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=8)
    parser.add_argument("--warmup", type=float, default=2)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--count", type=int, default=20, help="sequential requests counted for Redis commands")
    parser.add_argument("--quiet", action="store_true", default=True)
    parser.add_argument("--yardstick", type=Path, default=HERE.parent.parent / "shared" / "bench")
    args = parser.parse_args()
    py = perf_table.yardstick_python()
    workdir = Path(tempfile.mkdtemp(prefix="turnout-admission-cost-"))
    fleet = Fleet()
    port = free_port()
    fleet.spawn("mock", [py, str(args.yardstick / "mock_upstream.py"), "--port", str(port)])
    mock = f"http://127.0.0.1:{port}"
    cpu: dict[str, dict[str, list[float]]] = {k: {"ingress": [], "worker": [], "redis": []} for k in KEYS}
    rps: dict[str, list[float]] = {k: [] for k in KEYS}
    try:
        wait_until(lambda: http_ok(f"{mock}/health"), 10, "mock upstream")
        gw = perf_variants.start_fleet(fleet, mock, {})
        for name, key in KEYS.items():
            counted = commands_per_request(gw.redis_url, perf_table.chat_sender(gw.base, key, "mock-d0"), n=args.count)
            print(f"{name}: {counted.fewest} client commands + {counted.fewest_inside_scripts} inside scripts")
        one_rep = perf_table.rep_loader(args, py, mock, workdir)
        for rep in range(args.reps):
            for name, key in KEYS.items():
                before = {role: perf_variants.cpu_s(pid) for role, pid in gw.pids.items()}
                row = one_rep(gw.base, key, [gw.pids["ingress"], gw.pids["worker"]], f"admission-{name}-{rep}")
                answered = row["rps"] * (args.duration + args.warmup)
                rps[name].append(row["rps"])
                for role, pid in gw.pids.items():
                    cpu[name][role].append(1000 * (perf_variants.cpu_s(pid) - before[role]) / max(answered, 1))
    finally:
        fleet.stop_all()
    print(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print("| key | req/s | CPU ms per request: ingress + worker | ingress | worker | Redis |")
    print("| --- | --- | --- | --- | --- | --- |")
    med = {k: {role: statistics.median(v) for role, v in roles.items()} for k, roles in cpu.items()}
    for name in KEYS:
        m = med[name]
        print(
            f"| {name} | {statistics.median(rps[name]):,.0f} | {m['ingress'] + m['worker']:.3f} | "
            f"{m['ingress']:.3f} | {m['worker']:.3f} | {m['redis']:.3f} |"
        )
    d = {role: med["limits"][role] - med["plain"][role] for role in med["plain"]}
    print(
        f"limits over plain: {d['ingress'] + d['worker']:+.3f} ms (ingress {d['ingress']:+.3f}, "
        f"worker {d['worker']:+.3f}), Redis {d['redis']:+.3f} ms; per rep: "
        + ", ".join(
            f"{(cpu['limits']['ingress'][i] + cpu['limits']['worker'][i]) - (cpu['plain']['ingress'][i] + cpu['plain']['worker'][i]):+.3f}"
            for i in range(args.reps)
        )
    )


if __name__ == "__main__":
    main()
