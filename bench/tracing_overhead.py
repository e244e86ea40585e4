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
own counters over the measured runs), the figure the tracing budget is set in.

Usage:
    .venv/bin/python bench/tracing_overhead.py [--concurrency 50] [--duration 8] [--reps 3] [--modes off,default,full]

Traffic goes to 127.0.0.1 only; every loop is bounded by time and count.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

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

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


def start_sink() -> str:
    """The local OTLP sink's base URL (a daemon thread of this process)."""
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def sink_bytes() -> int:
    """OTLP bytes the local sinks of this process have received so far."""
    return _Sink.received


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


def cpu_s(processes: list[psutil.Process]) -> float:
    """User + system CPU seconds the processes (and their children) have used so far."""
    total = 0.0
    for process in processes:
        for p in [process, *process.children(recursive=True)]:
            times = p.cpu_times()
            total += times.user + times.system
    return total


async def drive(base: str, concurrency: int, duration_s: float, max_requests: int) -> tuple[int, int, list[float]]:
    """Closed-loop load; returns (ok, failed, latencies in seconds)."""
    latencies: list[float] = []
    failed = 0
    sent = 0
    stop_at = time.monotonic() + duration_s
    body = {"model": "bench", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 16}
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
    return len(latencies), failed, latencies


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
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    fleet = Fleet()
    try:
        upstream, model = start_upstream(fleet, args.yardstick)
        sink = start_sink()
        started = {mode: start_mode(fleet, mode, upstream, model, sink) for mode in modes}
        for mode in modes:
            asyncio.run(drive(started[mode][0], args.concurrency, args.warmup, args.max_requests))
        results: dict[str, list[tuple[float, list[float], int, float]]] = {m: [] for m in modes}
        for rep in range(args.reps):
            for mode in modes:
                base, processes = started[mode]
                t0, cpu0 = time.monotonic(), cpu_s(processes)
                ok, failed, lat = asyncio.run(drive(base, args.concurrency, args.duration, args.max_requests))
                rps, cpu_ms = ok / (time.monotonic() - t0), (cpu_s(processes) - cpu0) * 1000 / max(ok, 1)
                results[mode].append((rps, lat, failed, cpu_ms))
                print(f"rep {rep + 1} {mode:9s} {rps:8.1f} req/s  {cpu_ms:.3f} CPU ms/req  failed {failed}", flush=True)
        print(f"\nconcurrency {args.concurrency}, {args.duration:.0f} s x {args.reps} reps, upstream {model}")
        print(f"{'mode':9s} {'req/s (median)':>15s} {'p50 ms':>8s} {'p99 ms':>8s} {'vs off':>8s} {'CPU ms/req':>11s}")
        baseline = statistics.median(r[0] for r in results[modes[0]])
        for mode in modes:
            rps = statistics.median(r[0] for r in results[mode])
            cpu = statistics.median(r[3] for r in results[mode])
            lat = sorted(x for r in results[mode] for x in r[1])
            p50 = lat[len(lat) // 2] * 1000 if lat else float("nan")
            p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000 if lat else float("nan")
            print(f"{mode:9s} {rps:15.1f} {p50:8.2f} {p99:8.2f} {rps / baseline - 1:+8.1%} {cpu:11.3f}")
        print(f"OTLP bytes received by the sink: {_Sink.received:,}")
        return 0
    finally:
        fleet.stop_all()


if __name__ == "__main__":
    sys.exit(main())
