#!/usr/bin/env python3
"""Driver of `bench/multihost/run.sh`, run inside one of its network namespaces.

    drive.py wait-tcp HOST PORT SECONDS     wait until HOST:PORT accepts
    drive.py wait-http URL SECONDS          wait until GET URL answers 200
    drive.py load --base URL --key KEY --model M --requests N --sim URL
                  --upstream-model NAME --worker NAME=METRICS_URL ...
                  [--kill NAME --kill-pid PID]

`load` sends N chat completions with the official openai SDK in two halves:
the first half 10 at a time, then each worker's own /metrics tells how many
jobs it started; the second half all at once, and once the `--kill` worker
runs at least one job it is SIGKILLed (by the pid run.sh started it with).
Every request must still succeed. Prints a summary; exit 0 when every check
held, 1 otherwise. Every loop is bounded in count and time; the addresses are
the run's own namespaces only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import sys
import time
from dataclasses import dataclass

import httpx
import openai


def wait_tcp(host: str, port: int, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return 0
        except OSError:
            time.sleep(0.1)
    print(f"drive: {host}:{port} not accepting after {timeout_s} s", file=sys.stderr)
    return 1


def wait_http(url: str, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=0.5).status_code == 200:
                return 0
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    print(f"drive: {url} not answering 200 after {timeout_s} s", file=sys.stderr)
    return 1


@dataclass
class Outcome:
    index: int
    ok: bool
    status: int | None
    latency_s: float
    attempts: str | None
    error: str | None = None


def scrape(text: str) -> dict[str, float]:
    """Prometheus text exposition -> {metric name: sum over its label sets}."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_part, _, value = line.rpartition(" ")
        name = name_part.split("{", 1)[0]
        try:
            out[name] = out.get(name, 0.0) + float(value)
        except ValueError:
            continue
    return out


async def metrics(http: httpx.AsyncClient, url: str) -> dict[str, float]:
    response = await http.get(url, timeout=2)
    response.raise_for_status()
    return scrape(response.text)


def jobs_of(m: dict[str, float]) -> int:
    return int(m.get("turnout_queue_wait_seconds_count", 0))


async def one(client: openai.AsyncOpenAI, model: str, index: int) -> Outcome:
    started = time.monotonic()
    try:
        raw = await client.chat.completions.with_raw_response.create(
            model=model,
            messages=[{"role": "user", "content": f"multihost request {index}"}],
            max_tokens=8,
        )
        completion = raw.parse()
        content = completion.choices[0].message.content
        return Outcome(
            index, bool(content), raw.status_code, time.monotonic() - started, raw.headers.get("x-turnout-attempts")
        )
    except openai.APIStatusError as exc:
        return Outcome(index, False, exc.status_code, time.monotonic() - started, None, str(exc)[:200])
    except openai.APIError as exc:
        return Outcome(index, False, None, time.monotonic() - started, None, f"{type(exc).__name__}: {exc}"[:200])


def describe(outcomes: list[Outcome]) -> str:
    lat = sorted(o.latency_s for o in outcomes)
    ok = sum(o.ok for o in outcomes)
    p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))]
    return f"{ok}/{len(outcomes)} ok, latency p50 {statistics.median(lat):.2f} s, p95 {p95:.2f} s, max {lat[-1]:.2f} s"


async def load(args: argparse.Namespace) -> int:
    workers = dict(w.split("=", 1) for w in args.worker)
    half = args.requests // 2
    checks: list[tuple[str, bool]] = []
    async with (
        httpx.AsyncClient() as http,
        openai.AsyncOpenAI(
            base_url=f"{args.base}/v1",
            api_key=args.key,
            max_retries=0,
            timeout=60,
        ) as client,
    ):
        await http.delete(f"{args.sim}/sim/log", timeout=2)
        started = time.monotonic()

        # phase A: both workers serve
        gate = asyncio.Semaphore(10)

        async def gated(i: int) -> Outcome:
            async with gate:
                return await one(client, args.model, i)

        phase_a = await asyncio.wait_for(asyncio.gather(*[gated(i) for i in range(half)]), 120)
        jobs_a = {name: jobs_of(await metrics(http, url)) for name, url in workers.items()}
        print(f"phase A: {half} requests, 10 at a time: {describe(phase_a)}")
        print(
            "phase A: jobs started per worker (its own /metrics): " + ", ".join(f"{n}={j}" for n, j in jobs_a.items())
        )
        checks.append(("phase A: every request answered 200 with content", all(o.ok for o in phase_a)))
        checks.append(("phase A: every worker served jobs", all(j > 0 for j in jobs_a.values())))

        # phase B: kill one worker with jobs in flight
        tasks = [asyncio.ensure_future(one(client, args.model, i)) for i in range(half, args.requests)]
        in_flight = 0
        killed_after = None
        if args.kill:
            poll_until = time.monotonic() + 5
            while time.monotonic() < poll_until:
                in_flight = int((await metrics(http, workers[args.kill])).get("turnout_in_flight_jobs", 0))
                if in_flight > 0:
                    break
                await asyncio.sleep(0.05)
            os.kill(args.kill_pid, signal.SIGKILL)
            killed_after = time.monotonic() - started
        phase_b = await asyncio.wait_for(asyncio.gather(*tasks), 120)
        survivors = {n: u for n, u in workers.items() if n != args.kill}
        jobs_end = {name: jobs_of(await metrics(http, url)) for name, url in survivors.items()}
        print(
            f"phase B: {len(tasks)} requests at once, {args.kill} SIGKILLed (pid {args.kill_pid}) "
            f"with {in_flight} job(s) in flight: {describe(phase_b)}"
        )
        print(
            "phase B: jobs started per surviving worker (cumulative): "
            + ", ".join(f"{n}={j}" for n, j in jobs_end.items())
        )
        checks.append(("phase B: every request answered 200 with content", all(o.ok for o in phase_b)))
        if args.kill:
            checks.append((f"phase B: {args.kill} had jobs in flight when killed", in_flight > 0))

        log = (await http.get(f"{args.sim}/sim/log", params={"model": args.upstream_model}, timeout=5)).json()
        calls = len(log)
        everything = phase_a + phase_b
        print(
            f"upstream calls seen by the simulator: {calls} for {len(everything)} requests "
            f"({calls - len(everything)} duplicate(s) from the killed worker's in-flight jobs)"
        )
        checks.append(("every request reached the upstream", calls >= len(everything)))
        checks.append(
            ("duplicates bounded by the killed worker's in-flight jobs", calls - len(everything) <= max(in_flight, 0))
        )
        failed = [o for o in everything if not o.ok]
        for o in failed[:10]:
            print(f"  request {o.index}: status {o.status} {o.error}")
        print(
            f"total: {describe(everything)} in {time.monotonic() - started:.1f} s"
            + (f" (kill at {killed_after:.1f} s)" if killed_after is not None else "")
        )
    print("checks:")
    for text, ok in checks:
        print(f"  [{'ok' if ok else 'FAIL'}] {text}")
    return 0 if all(ok for _, ok in checks) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="drive.py")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("wait-tcp")
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("seconds", type=float)
    p = sub.add_parser("wait-http")
    p.add_argument("url")
    p.add_argument("seconds", type=float)
    p = sub.add_parser("load")
    p.add_argument("--base", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--requests", type=int, default=50)
    p.add_argument("--sim", required=True)
    p.add_argument("--upstream-model", required=True)
    p.add_argument("--worker", action="append", default=[], help="NAME=METRICS_URL")
    p.add_argument("--kill", help="worker NAME to SIGKILL during the second half")
    p.add_argument("--kill-pid", type=int)
    args = parser.parse_args(argv)
    if args.cmd == "wait-tcp":
        return wait_tcp(args.host, args.port, args.seconds)
    if args.cmd == "wait-http":
        return wait_http(args.url, args.seconds)
    if not 2 <= args.requests <= 1000:
        parser.error("--requests must be 2..1000 (a bounded run)")
    if args.kill and (args.kill_pid is None or args.kill not in dict(w.split("=", 1) for w in args.worker)):
        parser.error("--kill needs --kill-pid and a matching --worker")
    return asyncio.run(load(args))


if __name__ == "__main__":
    sys.exit(main())
