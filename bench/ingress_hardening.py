#!/usr/bin/env python3
"""Ingress HTTP hardening: huge headers, slow loris, slow bodies and idle connections.

Starts Redis and the simulator once, then, for each server variant in
`--servers`, one ingress process serving the Turnout app, and attacks it:

1. **header flood**: 10 connections at once, each sending a request whose
   one header is 32 MB; reports what each got back and the ingress's peak
   RSS (process tree) against its RSS at rest.
2. **slow clients**, all at once for `--hold-s` seconds: 200 slow-loris
   connections (request line, then one header line per second, never
   finished), 50 slow bodies (complete headers, `content-length: 100000`,
   one byte per second) and 100 idle connections (nothing sent). Reports how
   many of each the server still holds at 5 s, 15 s and at the end, and the
   latency of `GET /health/liveness` sent once a second meanwhile.

Variants: `uvicorn` (httptools, as before), `uvicorn-h11` (h11 with
`h11_max_incomplete_event_size` 64 KiB and `--limit-concurrency`),
`hypercorn` (h11 incomplete size 64 KiB, `read_timeout` 10 s), `granian`
(`header_read_timeout` 10 s, buffer 64 KiB), `guarded` (what `turnout
ingress` runs: httptools plus `turnout_ingress.guard.http`). Missing servers
are skipped. Bounded: one wave per variant.

Usage: .venv/bin/python bench/ingress_hardening.py [--servers uvicorn,guarded] [--hold-s 40]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

import httpx
import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from support.procs import Fleet, free_port, http_ok, wait_until

KEY = "tk-bench-hardening-000001"
CONFIG = """\
providers:
  sim: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: k}}
models:
  ok: {{offers: [{{provider: sim, model: ok}}]}}
orgs:
  bench:
    keys: [{{name: main, key: {key}}}]
"""
MIB = 1024 * 1024
HEADER_MB = 32
FLOOD = 10
LORIS, SLOW_BODY, IDLE = 200, 50, 100


def serve(variant: str, port: int) -> None:
    """Run the ingress app under `variant` on 127.0.0.1:`port` (config and Redis from the environment)."""
    if variant == "granian":
        from granian.constants import Interfaces
        from granian.http import HTTP1Settings
        from granian.server import Server

        Server(
            "turnout_ingress.app:app_from_env",
            address="127.0.0.1",
            port=port,
            interface=Interfaces.ASGI,
            factory=True,
            http1_settings=HTTP1Settings(header_read_timeout=10_000, max_buffer_size=64 * 1024),
        ).serve()
        return
    from turnout_ingress.app import app_from_env

    app = app_from_env()
    if variant == "hypercorn":
        from hypercorn.asyncio import serve as hypercorn_serve
        from hypercorn.config import Config

        config = Config()
        config.bind = [f"127.0.0.1:{port}"]
        config.h11_max_incomplete_size = 64 * 1024
        config.read_timeout = 10
        asyncio.run(hypercorn_serve(app, config))  # type: ignore[arg-type]
        return
    import uvicorn

    options: dict[str, object] = {"loop": "uvloop", "http": "httptools"}
    if variant == "uvicorn-h11":
        options = {
            "loop": "uvloop",
            "http": "h11",
            "h11_max_incomplete_event_size": 64 * 1024,
            "limit_concurrency": 10_000,
        }
    elif variant == "guarded":
        from turnout.config import load_config
        from turnout_ingress.guard.http import GuardLimits, guarded_protocol

        gateway = load_config(os.environ["TURNOUT_CONFIG"]).raw.gateway
        options["http"] = guarded_protocol(GuardLimits.of(gateway))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, **options)  # type: ignore[arg-type]


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and its children."""
    try:
        proc = psutil.Process(pid)
        return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])
    except psutil.NoSuchProcess:
        return 0


class Conn:
    """A raw client connection that notes when (and how) the server ended it."""

    def __init__(self) -> None:
        self.closed_at: float | None = None
        self.answer = ""
        self.writer: asyncio.StreamWriter | None = None

    async def open(self, port: int) -> None:
        reader, self.writer = await asyncio.open_connection("127.0.0.1", port)
        asyncio.get_running_loop().create_task(self._watch(reader))

    async def _watch(self, reader: asyncio.StreamReader) -> None:
        try:
            data = await reader.read(200)
        except (ConnectionError, OSError):
            data = b""
        self.answer = data.split(b"\r\n", 1)[0].decode(errors="replace") or "closed"
        self.closed_at = time.monotonic()

    async def send(self, data: bytes) -> bool:
        if self.closed_at is not None or self.writer is None:
            return False
        try:
            self.writer.write(data)
            await self.writer.drain()
            return True
        except (ConnectionError, OSError):
            self.closed_at = self.closed_at or time.monotonic()
            return False

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def flood(port: int, pid: int) -> str:
    rest = tree_rss(pid)
    peak = rest
    conns = [Conn() for _ in range(FLOOD)]
    for c in conns:
        await c.open(port)
    head = f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {KEY}\r\nx-pad: ".encode()
    chunk = b"a" * (256 * 1024)

    async def one(c: Conn) -> int:
        sent = 0
        if not await c.send(head):
            return sent
        for _ in range(HEADER_MB * 4):
            if not await c.send(chunk):
                return sent
            sent += len(chunk)
        await c.send(b"\r\ncontent-length: 2\r\n\r\n{}")
        return sent

    started = time.monotonic()
    task = asyncio.gather(*(one(c) for c in conns))
    while not task.done():
        peak = max(peak, tree_rss(pid))
        await asyncio.sleep(0.05)
    sent = task.result()
    for _ in range(100):
        if all(c.closed_at is not None for c in conns):
            break
        peak = max(peak, tree_rss(pid))
        await asyncio.sleep(0.05)
    elapsed = time.monotonic() - started
    answers = sorted({c.answer or "no answer" for c in conns})
    for c in conns:
        c.close()
    return (
        f"header flood {FLOOD} x {HEADER_MB} MB: RSS {rest / MIB:.0f} -> peak {peak / MIB:.0f} MiB "
        f"(+{(peak - rest) / MIB:.0f}); server took {statistics.mean(sent) / MIB:.1f} MB per connection "
        f"on average before refusing; answers {answers}; {elapsed:.1f} s"
    )


async def slow_clients(port: int, pid: int, base: str, hold_s: float) -> str:
    rest = tree_rss(pid)
    peak = rest
    loris = [Conn() for _ in range(LORIS)]
    bodies = [Conn() for _ in range(SLOW_BODY)]
    idle = [Conn() for _ in range(IDLE)]
    opened = 0
    for c in [*loris, *bodies, *idle]:
        try:
            await c.open(port)
            opened += 1
        except OSError:
            c.closed_at = time.monotonic()
    start = time.monotonic()
    for c in loris:
        await c.send(b"GET /health/liveness HTTP/1.1\r\nhost: x\r\n")
    body_head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {KEY}\r\n"
        "content-type: application/json\r\ncontent-length: 100000\r\n\r\n"
    ).encode()
    for c in bodies:
        await c.send(body_head)
    held: dict[str, tuple[int, int, int]] = {}
    latencies: list[float] = []
    failures = 0
    async with httpx.AsyncClient(timeout=5) as client:
        marks = [5.0, 15.0]
        tick = 0
        while time.monotonic() - start < hold_s:
            tick += 1
            for i, c in enumerate(loris):
                await c.send(f"x-{tick}-{i}: y\r\n".encode())
            for c in bodies:
                await c.send(b" ")
            t0 = time.monotonic()
            try:
                ok = (await client.get(f"{base}/health/liveness")).status_code == 200
            except httpx.HTTPError:
                ok = False
            latencies.append(time.monotonic() - t0)
            failures += not ok
            peak = max(peak, tree_rss(pid))
            elapsed = time.monotonic() - start
            while marks and elapsed >= marks[0] - 0.5:
                held[f"{marks.pop(0):.0f}s"] = tuple(  # type: ignore[assignment]
                    sum(1 for c in group if c.closed_at is None) for group in (loris, bodies, idle)
                )
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
    held[f"{hold_s:.0f}s"] = tuple(  # type: ignore[assignment]
        sum(1 for c in group if c.closed_at is None) for group in (loris, bodies, idle)
    )
    answers = sorted({c.answer for c in [*loris, *bodies, *idle] if c.closed_at is not None and c.answer})
    for c in [*loris, *bodies, *idle]:
        c.close()
    latencies.sort()
    held_text = ", ".join(
        f"at {k}: {v[0]}/{LORIS} loris, {v[1]}/{SLOW_BODY} slow bodies, {v[2]}/{IDLE} idle" for k, v in held.items()
    )
    return (
        f"slow clients ({opened} opened): still held {held_text}; answers {answers}; "
        f"liveness during: p50 {statistics.median(latencies) * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms, "
        f"{failures} failed; RSS {rest / MIB:.0f} -> {peak / MIB:.0f} MiB"
    )


def available(variant: str) -> bool:
    module = {"hypercorn": "hypercorn", "granian": "granian"}.get(variant)
    return module is None or importlib.util.find_spec(module) is not None


def main() -> int:
    """Run the measurement."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", default="uvicorn,uvicorn-h11,hypercorn,granian,guarded")
    parser.add_argument("--hold-s", type=float, default=40.0)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return 0
    fleet = Fleet()
    try:
        _, redis_url = fleet.redis()
        _, sim_url = fleet.sim()
        config_path = fleet.workdir / "turnout.yaml"
        config_path.write_text(CONFIG.format(sim=sim_url, key=KEY))
        env = {"TURNOUT_CONFIG": str(config_path), "TURNOUT_REDIS_URL": redis_url}
        for variant in args.servers.split(","):
            if not available(variant):
                print(f"== {variant}: not installed, skipped")
                continue
            port = free_port()
            proc = fleet.spawn(
                f"{variant}-{port}", [sys.executable, __file__, "--serve", variant, "--port", str(port)], env
            )
            base = f"http://127.0.0.1:{port}"
            wait_until(lambda: http_ok(f"{base}/health/liveness"), 30, variant)
            time.sleep(1.0)
            print(f"== {variant}", flush=True)
            print("  " + asyncio.run(flood(port, proc.popen.pid)), flush=True)
            print("  " + asyncio.run(slow_clients(port, proc.popen.pid, base, args.hold_s)), flush=True)
            proc.stop(grace_s=5)
    finally:
        fleet.stop_all()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
