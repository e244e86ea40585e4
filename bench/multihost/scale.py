#!/usr/bin/env python3
"""Scale-out: the same load against Turnout with 1, 2 and 4 workers, every process on its own "host".

    sudo .venv/bin/python bench/multihost/scale.py [--workers 1,2,4] [--duration 8] [--reps 3]
        [--warmup 2] [--concurrency 50] [--quick] [--yardstick DIR] [--json out.json] [--keep-logs]

Each process runs in its own network namespace on a private bridge
(`netns.py`; the layout of `run.sh`), so ingress, workers, Redis and the
upstream talk over veths as separate hosts would:

    tns-redis    10.213.0.10  redis-server (AOF on, everysec)
    tns-mock     10.213.0.11  the yardstick's fast mock upstream (`mock-d0` answers at once)
    tns-ingress  10.213.0.20  turnout ingress
    tns-client   10.213.0.21  the load generator (`closed_loop.py`) and the readiness probes
    tns-w1..w4   10.213.0.31..34  turnout workers

Per worker count a fresh Redis, the workers and one ingress start (the mock
stays up), then `closed_loop.py` in tns-client runs a closed loop of
non-streaming `mock-d0` requests (`--concurrency` lanes) for a warm-up and
`--reps` windows of `--duration` s, and counts per window: requests, CPU of
the ingress and of the workers (`/proc/PID/stat` utime + stime), Redis's CPU
(`INFO cpu`) and commands (`INFO commandstats`); then the same counters over
an idle window of `--idle` s, for each process's own CPU rate at rest (a
worker's heartbeat, scans, lease renewal). Prints per worker count the
medians: req/s, CPU ms per request (ingress, workers, both; both also net of
the idle rates, and against the first worker count), Redis CPU ms and
commands per request (`INFO commandstats`: a script's inner commands count
too), `publish` per request (one per answered job), the commands the clients
send per request and those scripts run (`MONITOR` over `--count` sequential
requests after the load, the fewest; an `EVALSHA` counts once) and the
projected fleet ceiling per Redis core, 1000 / (Redis CPU ms per request):
a projection from this run's Redis CPU per request, not a measurement.

Needs root (namespaces) and iproute2. Nothing is added to the machine's own
namespace and no namespace has a route out: every packet stays between the
run's namespaces. Every loop is bounded in time and count; the namespaces and
every process the run started are removed on exit, also on Ctrl-C or SIGTERM.
The Turnout processes get `TURNOUT_REDIS_CALL_TIMEOUT_MS=5000`, as the test
and bench fleets do (a busy 2-core machine), and no OpenTelemetry exporter.
Logs are in a temporary folder, removed after a clean run (`--keep-logs`
keeps them; a failed run keeps them and prints the path).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NoReturn

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

from netns import Namespaces
from perf_table import yardstick_python
from run_gateway_bench import CONFIG, KEY
from scale_figures import Window, format_table, summarize, with_change

from support.procs import Fleet, Proc, wait_until

MAX_WORKERS = 4
BRIDGE = "tns-net"
HOSTS = {
    "tns-redis": 10,
    "tns-mock": 11,
    "tns-ingress": 20,
    "tns-client": 21,
    **{f"tns-w{i}": 30 + i for i in range(1, MAX_WORKERS + 1)},
}
MOCK_PORT, INGRESS_PORT, REDIS_PORT = 9100, 8080, 6379


class Run:
    """One run's namespaces, processes and logs; `spawn` starts a command inside a namespace."""

    def __init__(self, net: Namespaces, workdir: Path, python: str) -> None:
        self.net = net
        self.workdir = workdir
        self.python = python
        self.env = {"PYTHONPATH": os.pathsep.join([str(REPO / "libs"), str(REPO / "services")])}

    def spawn(self, fleet: Fleet, name: str, ns: str, argv: list[str]) -> Proc:
        """Start `argv` in namespace `ns` under `fleet` (log `<fleet.workdir>/<name>.log`)."""
        clean = ["env", "-u", "OTEL_TRACES_EXPORTER", "-u", "OTEL_METRICS_EXPORTER"]
        return fleet.spawn(name, self.net.exec_argv(ns, [*clean, *argv]), self.env)

    def probe(self, *args: str) -> None:
        """`drive.py wait-tcp|wait-http ...` from the client namespace; raises RuntimeError when it fails."""
        argv = self.net.exec_argv("tns-client", [self.python, str(HERE / "drive.py"), *args])
        done = subprocess.run(argv, env={**os.environ, **self.env}, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip()}")

    def turnout(self, fleet: Fleet, role: str, ns: str, config: Path, redis_url: str, *extra: str) -> Proc:
        """A Turnout process (`ingress` or `worker`) in namespace `ns`."""
        argv = [self.python, "-m", "turnout_cli.main", role, "--config", str(config), "--redis-url", redis_url]
        return self.spawn(fleet, ns.removeprefix("tns-"), ns, [*argv, *extra])


def worker_ready(proc: Proc) -> Proc:
    """`proc` once its log says "worker ready"; RuntimeError when it exits first, TimeoutError after 60 s."""
    wait_until(lambda: "worker ready" in proc.log() or not proc.alive(), 60, proc.name)
    if not proc.alive():
        raise RuntimeError(f"{proc.name} exited: {proc.log()[-2000:]}")
    return proc


def measure(run: Run, workers: int, mock: str, args: argparse.Namespace) -> dict[str, Any]:
    """Start Redis, `workers` workers and an ingress; load them from the client namespace; stop them.

    Returns {"row": the summarized figures, "windows": the raw windows}. Raises RuntimeError when a process
    does not come up or the load generator fails.
    """
    fleet = Fleet(workdir=run.workdir / f"{workers}w")
    fleet.workdir.mkdir()
    net = run.net
    redis_host = net.address("tns-redis")
    redis_url = f"redis://{redis_host}:{REDIS_PORT}/0"
    try:
        (fleet.workdir / "redis").mkdir()
        server = shutil.which("redis-server") or "redis-server"
        run.spawn(
            fleet,
            "redis",
            "tns-redis",
            [server, "--bind", redis_host, "--port", str(REDIS_PORT), "--protected-mode", "no"]
            + ["--dir", str(fleet.workdir / "redis"), "--appendonly", "yes", "--save", "", "--loglevel", "warning"],
        )
        run.probe("wait-tcp", redis_host, str(REDIS_PORT), "10")
        config = fleet.workdir / "turnout.yaml"
        config.write_text(CONFIG.format(mock=mock, key=KEY, max_jobs=args.max_jobs))
        pids = []
        for i in range(1, workers + 1):
            proc = run.turnout(fleet, "worker", f"tns-w{i}", config, redis_url)
            pids.append(worker_ready(proc).popen.pid)
        ingress_host = net.address("tns-ingress")
        ingress = run.turnout(
            fleet, "ingress", "tns-ingress", config, redis_url, "--host", ingress_host, "--port", str(INGRESS_PORT)
        )
        base = f"http://{ingress_host}:{INGRESS_PORT}"
        run.probe("wait-http", f"{base}/health/readiness", "60")
        print(f"scale: {workers} worker(s) up (ingress pid {ingress.popen.pid}, workers {pids}); loading", flush=True)
        load = [run.python, str(HERE / "closed_loop.py"), "--base", base, "--key", KEY, "--redis-url", redis_url]
        load += ["--pids", f"ingress={ingress.popen.pid}", "--pids", "workers=" + ",".join(map(str, pids))]
        for flag in ("concurrency", "duration", "warmup", "reps", "pause", "idle", "count"):
            load += [f"--{flag}", str(getattr(args, flag))]
        bound_s = args.warmup + args.reps * (args.duration + args.pause + 60) + 120
        done = subprocess.run(
            net.exec_argv("tns-client", load),
            env={**os.environ, **run.env},
            capture_output=True,
            text=True,
            timeout=bound_s,
        )
        if done.returncode != 0:
            raise RuntimeError(f"load generator failed ({done.returncode}): {done.stderr[-2000:]}")
        out = json.loads(done.stdout)
    finally:
        fleet.stop_all()
    row = summarize(workers, [Window(**w) for w in out["windows"]], Window(**out["idle"]))
    row["client_cmds"] = out["sequential"]["client"]
    row["script_cmds"] = out["sequential"]["inside_scripts"]
    row["client_cmds_breakdown"] = out["sequential"]["breakdown"]
    return {"row": row, "windows": out["windows"], "idle": out["idle"]}


def preflight(args: argparse.Namespace) -> str | None:
    """Why the run cannot start, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces); run with sudo"
    if shutil.which("ip") is None:
        return "ip (iproute2) is missing: apt-get install -y iproute2"
    if shutil.which("redis-server") is None:
        return "redis-server is missing: apt-get install -y redis-server"
    if not (args.yardstick / "mock_upstream.py").exists():
        return f"no mock upstream at {args.yardstick}; pass --yardstick DIR"
    return None


def _terminate(signum: int, _frame: object) -> NoReturn:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Measure every worker count and print the table; 0 when every count was measured without errors."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="1,2,4", help=f"worker counts, each 1..{MAX_WORKERS}")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per measured window")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between windows")
    parser.add_argument("--max-jobs", type=int, default=500, help="worker_max_jobs of every worker")
    parser.add_argument("--idle", type=float, default=3.0, help="seconds of the idle window after the load")
    parser.add_argument("--count", type=int, default=20, help="sequential requests counted with MONITOR")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 rep of 3 s after 1 s, 5 counted")
    parser.add_argument("--yardstick", type=Path, default=REPO.parent / "shared" / "bench")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep-logs", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.duration, args.warmup, args.reps, args.count = 3.0, 1.0, 1, 5
    counts = [int(w) for w in args.workers.split(",")]
    if not all(1 <= w <= MAX_WORKERS for w in counts):
        parser.error(f"--workers: counts 1..{MAX_WORKERS}")
    problem = preflight(args)
    if problem:
        print(f"scale: {problem}", file=sys.stderr)
        return 2
    mock_python = yardstick_python()
    signal.signal(signal.SIGTERM, _terminate)
    workdir = Path(tempfile.mkdtemp(prefix="turnout-scale-"))
    results: dict[int, dict[str, Any]] = {}
    clean = False
    try:
        with Namespaces(BRIDGE, HOSTS) as net:
            run = Run(net, workdir, sys.executable)
            base = Fleet(workdir=workdir)
            try:
                mock_host = net.address("tns-mock")
                run.spawn(
                    base,
                    "mock",
                    "tns-mock",
                    [mock_python, str(args.yardstick / "mock_upstream.py"), "--host", mock_host]
                    + ["--port", str(MOCK_PORT)],
                )
                mock = f"http://{mock_host}:{MOCK_PORT}"
                run.probe("wait-http", f"{mock}/health", "20")
                for workers in counts:
                    results[workers] = measure(run, workers, mock, args)
                    time.sleep(1)
            finally:
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                base.stop_all()
        clean = True
    finally:
        if clean and not args.keep_logs:
            shutil.rmtree(workdir, ignore_errors=True)
            print("scale: cleaned up (processes, namespaces, logs)", flush=True)
        else:
            print(f"scale: cleaned up (processes, namespaces); logs kept in {workdir}", flush=True)
    rows = with_change([results[w]["row"] for w in counts])
    print()
    print(format_table(rows))
    print("\nRedis commands per request under load (INFO commandstats, scripts' inner commands included):")
    for row in rows:
        top = ", ".join(f"{name} {n:.2f}" for name, n in list(row["redis_cmds_breakdown"].items())[:8])
        print(f"  {row['workers']} worker(s): {top}")
    print("Commands the clients send per request (MONITOR, sequential; an EVALSHA once):")
    for row in rows:
        top = ", ".join(
            f"{name} {n}" for name, n in sorted(row["client_cmds_breakdown"].items(), key=lambda kv: -kv[1])
        )
        print(f"  {row['workers']} worker(s): {row['client_cmds']} ({top}); {row['script_cmds']} inside scripts")
    if args.json:
        env = {"cpus": os.cpu_count(), "concurrency": args.concurrency, "duration_s": args.duration}
        env |= {"warmup_s": args.warmup, "reps": args.reps, "max_jobs": args.max_jobs}
        windows = {str(w): {"load": results[w]["windows"], "idle": results[w]["idle"]} for w in counts}
        args.json.write_text(json.dumps({"env": env, "rows": rows, "windows": windows}, indent=1))
    return 0 if all(row["errors"] == 0 for row in rows) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("scale: interrupted", file=sys.stderr)
        sys.exit(130)
