#!/usr/bin/env python3
"""Throughput with tracing and attempt records on vs off, same machine, interleaved.

Starts on 127.0.0.1, per mode, a private redis-server, one ingress and one
worker routing to a fast mock upstream (the yardstick's `mock_upstream.py`
when present, else Turnout's simulator), then drives each mode in turn with
the same closed-loop load (`--concurrency` requests in flight, `--duration`
seconds, at most `--max-requests`), `--reps` times, interleaved, and prints
requests/s and latency percentiles per mode.

Modes:
    off      no trace exporter (spans unsampled), `records_max: 0`
    default  no trace exporter (spans unsampled), records on (the shipped default)
    full     every span recorded and exported (JSON lines file, batch
             processor), records on, worker metrics port on
    otlp     every span exported by OTLP/HTTP (protobuf) to a local sink that
             answers 200, records on: what an operator with a collector runs
    sampled  as otlp with `parentbased_traceidratio` at 0.1 (one trace in ten)
    unsampled as otlp with `parentbased_always_off`: the SDK loaded, nothing kept

Besides requests/s and latency, each row gives the CPU the ingress and the
worker spent per answered request (ms, user + system, from the processes'
own counters over the measured runs; in total and split ingress / worker),
the figure the tracing budget is set in.

`--rate R` paces the load instead (open loop: R requests/s over the same
connections, the yardstick's client only): every mode then serves the same
request rate, so CPU per request compares the same work. In the closed loop
a mode that costs more serves fewer requests/s, and CPU per request rises
with it (the processes' batching amortises less at a lower rate).

The load comes from the yardstick's raw asyncio client (`bench_gateway.py`'s
`run_load`, uvloop when installed) when the yardstick is present, else from an
httpx client (whose own cost at c=50 caps the load near 150 req/s on a 2-core
machine: per-request CPU is then higher in every mode). The OTLP sink runs in a
process of its own, so its work competes with neither the client nor the fleet's
counters.

Usage:
    .venv/bin/python bench/tracing_overhead.py [--concurrency 50] [--duration 8] [--reps 3] [--modes off,default,full]

Traffic goes to 127.0.0.1 only; every loop is bounded by time and count.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from support.procs import Fleet, free_port, http_ok, wait_until

KEY = "tk-bench-tracing-000000001"
CONFIG = """\
providers:
  mock: {{kind: openai_compatible, base_url: "{upstream}/v1", api_key: bench-key}}
models:
  bench: {{offers: [{{provider: mock, model: "{model}", input_usd_per_mtok: 1, output_usd_per_mtok: 2}}]}}
gateway: {{max_queue_depth: 100000, records_max: {records_max}}}
orgs:
  bench:
    keys: [{{name: bench, key: {key}}}]
"""
MODES = {
    "off": ({}, 0),
    "default": ({}, 100_000),
    "full": ({"TURNOUT_TRACE_FILE": "{dir}/spans-{{service}}.jsonl"}, 100_000),
    "otlp": ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "{sink}"}, 100_000),
    "sampled": (
        {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "{sink}",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.1",
        },
        100_000,
    ),
    "unsampled": (
        {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "{sink}",
            "OTEL_TRACES_SAMPLER": "parentbased_always_off",
        },
        100_000,
    ),
}


class _Sink(BaseHTTPRequestHandler):
    """An OTLP/HTTP collector that keeps nothing: reads each export and answers 200 with an
    empty `ExportTraceServiceResponse` (zero protobuf bytes)."""

    received = 0

    def do_POST(self) -> None:
        """Read the export, count its bytes, answer 200."""
        _Sink.received += len(self.rfile.read(int(self.headers.get("content-length") or 0)))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        """200: the sink is up."""
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


def serve_sink(port: int) -> None:
    """Run the sink on `port` until killed, printing the bytes received every second (`--sink`)."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    while True:
        time.sleep(1)
        print(_Sink.received, flush=True)


def start_sink(fleet: Fleet) -> tuple[str, Path]:
    """The local OTLP sink (a process of its own): its base URL and its log (bytes received so far)."""
    port = free_port()
    proc = fleet.spawn("otlp-sink", [sys.executable, str(Path(__file__).resolve()), "--sink", str(port)])
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: http_ok(url), 10, "OTLP sink")
    return url, proc.log_path


def sink_bytes(log: Path) -> int:
    """The bytes the sink has received (its last printed count)."""
    lines = log.read_text().split()
    return int(lines[-1]) if lines else 0


def start_upstream(fleet: Fleet, yardstick: Path) -> tuple[str, str]:
    """The mock upstream's base URL and the model name to route to."""
    mock = yardstick / "mock_upstream.py"
    if mock.exists():
        port = free_port()
        fleet.spawn("mock", [sys.executable, str(mock), "--port", str(port)])
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: http_ok(f"{url}/health"), 10, "mock upstream")
        return url, "mock-d0"
    _, url = fleet.sim()
    return url, "bench-ok"


def start_mode(fleet: Fleet, mode: str, upstream: str, model: str, sink: str) -> tuple[str, list[psutil.Process]]:
    """Start redis, one worker and one ingress for `mode`; return the ingress URL and the two processes."""
    extra, records_max = MODES[mode]
    _, redis_url = fleet.redis()
    workdir = fleet.workdir / mode
    workdir.mkdir()
    config = workdir / "turnout.yaml"
    config.write_text(CONFIG.format(upstream=upstream, model=model, records_max=records_max, key=KEY))
    env = {k: v.format(dir=workdir, sink=sink) for k, v in extra.items()}
    env["TURNOUT_METRICS_PORT"] = str(free_port()) if mode == "full" else "0"
    worker = fleet.worker(config, redis_url, name=f"worker-{mode}", env=env)
    ingress, base = fleet.ingress(config, redis_url, env=env)
    return base, [psutil.Process(worker.popen.pid), psutil.Process(ingress.popen.pid)]


def cpu_s(processes: list[psutil.Process]) -> list[float]:
    """User + system CPU seconds each process (with its children) has used so far."""
    spent = []
    for process in processes:
        total = 0.0
        for p in [process, *process.children(recursive=True)]:
            times = p.cpu_times()
            total += times.user + times.system
        spent.append(total)
    return spent


def yardstick_client(yardstick: Path) -> ModuleType | None:
    """The yardstick's `bench_gateway` module (its raw asyncio client), or None when absent."""
    path = yardstick / "bench_gateway.py"
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location("bench_gateway", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def drive(
    client: ModuleType | None,
    base: str,
    concurrency: int,
    duration_s: float,
    max_requests: int,
    rate: float | None = None,
) -> tuple[int, int, list[float]]:
    """Closed-loop load (the yardstick's client when given, else httpx), or `rate` requests/s
    (the yardstick's client); (ok, failed, latencies in s)."""
    if client is None:
        return asyncio.run(drive_httpx(base, concurrency, duration_s, max_requests))
    body = json.dumps(BODY).encode()
    host, port, request = client.build_request(base, "/v1/chat/completions", body, {"authorization": f"Bearer {KEY}"})
    if rate is not None:
        paced = drive_paced(client, host, port, request, concurrency, duration_s, min(rate * duration_s, max_requests))
        ok, failed = asyncio.run(paced) if client.uvloop is None else client.uvloop.run(paced)
        return ok, failed, [float("nan"), float("nan")]
    run = client.run_load(host, port, request, concurrency, duration_s, 0.0, False, 0, max_requests)
    result: dict[str, Any] = asyncio.run(run) if client.uvloop is None else client.uvloop.run(run)
    failed = sum(result["errors"].values())
    return result["n"], failed, [result["p50"] / 1000, result["p99"] / 1000]


async def drive_paced(
    client: ModuleType, host: str, port: int, request: bytes, connections: int, duration_s: float, count: float
) -> tuple[int, int]:
    """`count` requests spread evenly over `duration_s` on `connections` keep-alive connections
    (a request waits for a free one); returns (ok, failed)."""
    free: asyncio.Queue[Any] = asyncio.Queue()
    for _ in range(connections):
        free.put_nowait(await client.open_conn(host, port))
    answers = {"ok": 0, "failed": 0}

    async def one(conn: Any) -> None:
        await conn.send(request)
        answers["ok" if conn.status == 200 else "failed"] += 1
        free.put_nowait(conn)

    start, sent, pending = time.perf_counter(), 0, []
    while sent < count:
        due = start + sent * duration_s / count
        if due > time.perf_counter():
            await asyncio.sleep(due - time.perf_counter())
        pending.append(asyncio.ensure_future(one(await free.get())))
        sent += 1
    await asyncio.gather(*pending)
    while not free.empty():
        free.get_nowait().transport.close()
    return answers["ok"], answers["failed"]


BODY = {"model": "bench", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 16}


async def drive_httpx(
    base: str, concurrency: int, duration_s: float, max_requests: int
) -> tuple[int, int, list[float]]:
    """Closed-loop load with httpx; returns (ok, failed, latencies in seconds)."""
    latencies: list[float] = []
    failed = 0
    sent = 0
    stop_at = time.monotonic() + duration_s
    body = BODY
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(
        base_url=base, headers={"authorization": f"Bearer {KEY}"}, limits=limits, timeout=30
    ) as client:

        async def one_client() -> None:
            nonlocal failed, sent
            while time.monotonic() < stop_at and sent < max_requests:
                sent += 1
                t0 = time.perf_counter()
                response = await client.post("/v1/chat/completions", json=body)
                if response.status_code == 200:
                    latencies.append(time.perf_counter() - t0)
                else:
                    failed += 1

        await asyncio.gather(*(one_client() for _ in range(concurrency)))
    latencies.sort()
    p50 = latencies[len(latencies) // 2] if latencies else float("nan")
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] if latencies else float("nan")
    return len(latencies), failed, [p50, p99]


def main() -> int:
    """Run the comparison; prints one table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--max-requests", type=int, default=200_000)
    parser.add_argument("--modes", default="off,default,full,otlp,sampled,unsampled")
    parser.add_argument("--yardstick", type=Path, default=HERE.parent.parent / "shared" / "bench")
    parser.add_argument("--rate", type=float, help="requests/s, paced (open loop); default: closed loop")
    parser.add_argument("--sink", type=int, help=argparse.SUPPRESS)  # run as the OTLP sink on this port
    args = parser.parse_args()
    if args.sink:
        serve_sink(args.sink)
    modes = [m for m in args.modes.split(",") if m]
    client = yardstick_client(args.yardstick)
    if args.rate and client is None:
        parser.error("--rate needs the yardstick's client (--yardstick)")
    fleet = Fleet()
    try:
        upstream, model = start_upstream(fleet, args.yardstick)
        sink, sink_log = start_sink(fleet)
        started = {mode: start_mode(fleet, mode, upstream, model, sink) for mode in modes}
        for mode in modes:
            drive(client, started[mode][0], args.concurrency, args.warmup, args.max_requests)
        results: dict[str, list[tuple[float, list[float], int, list[float]]]] = {m: [] for m in modes}
        for rep in range(args.reps):
            for mode in modes:
                results[mode].append(one_run(client, started[mode], args))
                rps, _, failed, cpu = results[mode][-1]
                print(
                    f"rep {rep + 1} {mode:9s} {rps:8.1f} req/s  {sum(cpu):.3f} CPU ms/req "
                    f"(ingress {cpu[1]:.3f} / worker {cpu[0]:.3f})  failed {failed}",
                    flush=True,
                )
        load = f"paced at {args.rate:.0f} req/s" if args.rate else "closed loop"
        print(f"\nconcurrency {args.concurrency}, {load}, {args.duration:.0f} s x {args.reps} reps, upstream {model}")
        print(
            f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; client {'yardstick' if client else 'httpx'}"
        )
        print_table(modes, results)
        time.sleep(1.5)
        print(f"OTLP bytes received by the sink: {sink_bytes(sink_log):,}")
        return 0
    finally:
        fleet.stop_all()


def one_run(
    client: ModuleType | None, started: tuple[str, list[psutil.Process]], args: argparse.Namespace
) -> tuple[float, list[float], int, list[float]]:
    """One measured run of one mode: (req/s, [p50, p99] s, failed, CPU ms per request [worker, ingress])."""
    base, processes = started
    t0, cpu0 = time.monotonic(), cpu_s(processes)
    ok, failed, lat = drive(client, base, args.concurrency, args.duration, args.max_requests, args.rate)
    elapsed, cpu1 = time.monotonic() - t0, cpu_s(processes)
    return ok / elapsed, lat, failed, [(b - a) * 1000 / max(ok, 1) for a, b in zip(cpu0, cpu1, strict=True)]


def print_table(modes: list[str], results: dict[str, list[tuple[float, list[float], int, list[float]]]]) -> None:
    """Medians per mode: req/s, p50, p99, req/s against the first mode, CPU ms per request (and its split)."""
    print(
        f"{'mode':9s} {'req/s (median)':>15s} {'p50 ms':>8s} {'p99 ms':>8s} {'vs first':>9s} "
        f"{'CPU ms/req':>11s} {'ingress':>8s} {'worker':>8s} {'CPU vs first':>13s}"
    )
    baseline = statistics.median(r[0] for r in results[modes[0]])
    base_cpu = statistics.median(sum(r[3]) for r in results[modes[0]])
    for mode in modes:
        runs = results[mode]
        rps = statistics.median(r[0] for r in runs)
        cpu = statistics.median(sum(r[3]) for r in runs)
        ingress = statistics.median(r[3][1] for r in runs)
        worker = statistics.median(r[3][0] for r in runs)
        p50 = statistics.median(r[1][0] for r in runs) * 1000
        p99 = statistics.median(r[1][1] for r in runs) * 1000
        print(
            f"{mode:9s} {rps:15.1f} {p50:8.2f} {p99:8.2f} {rps / baseline - 1:+9.1%} "
            f"{cpu:11.3f} {ingress:8.3f} {worker:8.3f} {cpu - base_cpu:+13.3f}"
        )


if __name__ == "__main__":
    sys.exit(main())
