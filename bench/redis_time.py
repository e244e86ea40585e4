#!/usr/bin/env python3
"""Where Redis spends its CPU per queued request: by command, and by Lua script.

Starts on 127.0.0.1 a private redis-server (AOF on, as Turnout requires),
the yardstick's fast mock (0 ms), one worker and one ingress; loads them with
the yardstick's load generator (`--concurrency`, non-streaming, gateway only)
once to warm up, then resets Redis's statistics and loads them again (Redis's
CPU and `INFO commandstats`), then once more while Redis logs every command's
duration (`SLOWLOG` with a threshold of 0 µs; a run of its own, as the log
costs Redis CPU).

Prints Redis's CPU per answered request (ms, `INFO cpu`, user + system, over
the measured load), the projected ceiling of one Redis core for the fleet
(1,000 / that figure, req/s), `INFO commandstats` per request (calls and µs;
a script's µs include the commands it ran inside, which are also listed
under their own names), and per script (named by its first key, ids as `*`)
the calls per request and the median and mean µs per call from the slow log
(its last `--slowlog` entries: the end of that run; wall time, so a busy
machine inflates them).

`--unix`: the processes reach Redis on a Unix socket instead of TCP on
127.0.0.1 (what a co-located Redis saves of each round trip).

Usage: .venv/bin/python bench/redis_time.py [--concurrency 50] [--duration 8] [--unix]

Bounded by time; traffic goes to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from perf_table import yardstick_python
from run_gateway_bench import CONFIG, KEY

from support.procs import Fleet, free_port, http_ok, wait_until


def load(py: str, yardstick: Path, base: str, mock: str, concurrency: int, duration: float, out: Path) -> float:
    """One gateway-only run of the load generator (1 s warm-up); its req/s."""
    subprocess.run(
        [py, str(yardstick / "bench_gateway.py"), "--gateway", base, "--gateway-key", KEY, "--mock", mock]
        + ["--concurrency", str(concurrency), "--delays", "0", "--modes", "nonstream", "--duration", str(duration)]
        + ["--warmup", "1", "--reps", "1", "--skip-direct", "--json", str(out)],
        stdout=subprocess.DEVNULL,
        check=True,
    )
    return float(json.loads(out.read_text())["summary"][0]["gateway"]["rps"])


def cpu_s(client: redis.Redis) -> tuple[float, float]:
    """Redis's own CPU seconds so far: (user, system)."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]), float(info["used_cpu_sys"])


def by_script(entries: list[dict[str, object]]) -> dict[str, list[int]]:
    """Slow-log durations (µs) of the `EVALSHA` calls, by the script's first key (ids as `*`)."""
    seen: dict[str, list[int]] = defaultdict(list)
    for entry in entries:
        command = entry["command"]
        words = (command.decode(errors="replace") if isinstance(command, bytes) else str(command)).split(" ")
        if words[0].upper() == "EVALSHA" and len(words) > 3:
            seen[re.sub(r"[0-9a-f]{8,}", "*", words[3])].append(int(entry["duration"]))  # type: ignore[call-overload]
    return seen


def main() -> int:
    """Measure and print (module doc); 0 on success."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--duration", type=float, default=8)
    parser.add_argument("--slowlog", type=int, default=50_000)
    parser.add_argument("--unix", action="store_true", help="Redis on a Unix socket instead of TCP on 127.0.0.1")
    parser.add_argument("--yardstick", type=Path, default=HERE.parent.parent / "shared" / "bench")
    args = parser.parse_args()
    py = yardstick_python()
    fleet = Fleet()
    try:
        _, url = fleet.redis(unix=args.unix)
        port = free_port()
        fleet.spawn("mock", [py, str(args.yardstick / "mock_upstream.py"), "--port", str(port)])
        mock = f"http://127.0.0.1:{port}"
        wait_until(lambda: http_ok(f"{mock}/health"), 10, "mock upstream")
        config = fleet.workdir / "bench.yaml"
        config.write_text(CONFIG.format(mock=mock, key=KEY, max_jobs=500))
        fleet.worker(config, url)
        _, base = fleet.ingress(config, url)
        client = redis.Redis.from_url(url)
        out = Path(tempfile.mkdtemp(prefix="turnout-redis-time-")) / "load.json"
        load(py, args.yardstick, base, mock, args.concurrency, 3, out)
        client.config_resetstat()
        reads = int(client.info("stats")["total_reads_processed"])
        before = cpu_s(client)
        rps = load(py, args.yardstick, base, mock, args.concurrency, args.duration, out)
        after = cpu_s(client)
        user, system = after[0] - before[0], after[1] - before[1]
        spent = user + system
        stats = client.info("commandstats")
        reads = int(client.info("stats")["total_reads_processed"]) - reads
        client.config_set("slowlog-log-slower-than", 0)  # a run of its own: the log costs Redis CPU
        client.config_set("slowlog-max-len", args.slowlog)
        client.slowlog_reset()
        load(py, args.yardstick, base, mock, args.concurrency, args.duration, out)
        requests = rps * (args.duration + 1)  # as the load generator counts (its warm-up included)
        per_request = 1000 * spent / requests
        print(
            f"c={args.concurrency}, {rps:,.0f} req/s, ~{requests:,.0f} requests; Redis CPU {per_request:.3f} ms per request "
            f"(user {1000 * user / requests:.3f}, system {1000 * system / requests:.3f})"
        )
        print(f"socket reads per request (about one per round trip): {reads / requests:.2f}")
        print(f"one Redis core's ceiling for the fleet: ~{1000 / per_request:,.0f} req/s\n")
        print("| command | calls per request | µs per request | µs per call |\n|---|---|---|---|")
        for name, row in sorted(stats.items(), key=lambda kv: -float(kv[1]["usec"]))[:20]:
            print(
                f"| {name.removeprefix('cmdstat_')} | {row['calls'] / requests:.2f} | {row['usec'] / requests:.2f} | {row['usec_per_call']:.2f} |"
            )
        scripts = by_script(client.slowlog_get(args.slowlog))
        logged = sum(len(v) for v in scripts.values())
        print(
            "\n| script (first key) | share of the logged script calls | median µs per call | mean µs per call |\n|---|---|---|---|"
        )
        for key, durations in sorted(scripts.items(), key=lambda kv: -sum(kv[1])):
            print(
                f"| {key} | {100 * len(durations) / max(logged, 1):.0f} % | {statistics.median(durations):.0f} | {statistics.mean(durations):.1f} |"
            )
        client.config_set("slowlog-log-slower-than", 10_000)
        return 0
    finally:
        fleet.stop_all()


if __name__ == "__main__":
    sys.exit(main())
