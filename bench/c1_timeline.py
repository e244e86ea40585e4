#!/usr/bin/env python3
"""Where one request waits at c=1: a timeline across the client, the ingress, Redis and the worker.

Starts on 127.0.0.1 a private redis-server, the yardstick's fast mock
(0 ms), one worker and one ingress; sends `--warmup` requests, then
`--requests` sequential ones (c=1, as the table's c=1 row does) while a
`MONITOR` connection records every command Redis runs, with Redis's own time
stamp and the connection it came from. Each connection is the ingress's or
the worker's (matched by its local port among each process's sockets). The
client stamps its send and its receipt with the same clock (one machine),
so every command of a request has an offset from the client's send.

Prints, for the requests whose command sequence is the most common one, the
median offset of each command (ms, and the gap from the one before: what
the process did between them), then the segments the issue names: the
ingress before its enqueue, the enqueue to the worker's first command
(doorbell wake-up and pickup), the worker's work around the upstream call,
and the delivery to the client's receipt (result delivery). A direct run to
the mock gives the upstream's own share.

Usage: .venv/bin/python bench/c1_timeline.py [--requests 300] [--warmup 50]

Bounded by count; traffic goes to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import psutil
import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from run_gateway_bench import CONFIG, KEY

from support.procs import Fleet, free_port, http_ok, wait_until

BODY = {"model": "mock-d0", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 20}


class Poster:
    """One keep-alive connection posting `BODY` to `/v1/chat/completions` (the standard library's
    client: a lighter client than httpx, so the client's own time is a small part of each figure)."""

    def __init__(self, base: str, headers: dict[str, str]) -> None:
        host, port = base.removeprefix("http://").split(":")
        self._conn = http.client.HTTPConnection(host, int(port), timeout=30)
        self._body = json.dumps(BODY).encode()
        self._headers = {"content-type": "application/json", **headers}

    def post(self) -> None:
        """Send one request and read its answer; raises on a status other than 200."""
        self._conn.request("POST", "/v1/chat/completions", self._body, self._headers)
        response = self._conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"{response.status}: {body[:200]!r}")


def ports_of(pid: int) -> set[int]:
    """Local TCP ports of `pid`'s sockets (its Redis connections among them)."""
    return {c.laddr.port for c in psutil.Process(pid).net_connections(kind="tcp") if c.laddr}


def record(url: str, seen: list[tuple[float, str, str]], stop: threading.Event, ready: threading.Event) -> None:
    """MONITOR into `seen`: (Redis time s, client port, command line), until `stop` and a marker."""
    with redis.Redis.from_url(url) as client, client.monitor() as mon:  # type: ignore[no-untyped-call]
        ready.set()
        for event in mon.listen():
            line = str(event.get("command", ""))
            seen.append((float(event["time"]), str(event.get("client_port", "")), line))
            if stop.is_set() and "c1-timeline-stop" in line:
                return


def label(line: str) -> str:
    """A short name of a command: its verb, and for a script its first key (ids as `*`)."""
    parts = re.sub(r"[0-9a-f]{8,}", "*", line).split(" ")
    verb = parts[0].upper()
    if verb in ("EVALSHA", "EVAL") and len(parts) > 3:
        return f"{verb} {parts[3][:40]}"
    return f"{verb} {parts[1][:40]}" if len(parts) > 1 else verb


def main() -> int:
    """Run the timeline; 0 on success."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--yardstick", type=Path, default=HERE.parent.parent / "shared" / "bench")
    args = parser.parse_args()
    fleet = Fleet()
    try:
        _, url = fleet.redis()
        port = free_port()
        fleet.spawn("mock", [sys.executable, str(args.yardstick / "mock_upstream.py"), "--port", str(port)])
        mock = f"http://127.0.0.1:{port}"
        wait_until(lambda: http_ok(f"{mock}/health"), 10, "mock upstream")
        config = fleet.workdir / "bench.yaml"
        config.write_text(CONFIG.format(mock=mock, key=KEY, max_jobs=500))
        worker = fleet.worker(config, url)
        ingress, base = fleet.ingress(config, url)
        return timeline(base, mock, url, [ingress.popen.pid, worker.popen.pid], args)
    finally:
        fleet.stop_all()


def timeline(base: str, mock: str, url: str, pids: list[int], args: argparse.Namespace) -> int:
    """Measure and print (module doc)."""
    client = Poster(base, {"authorization": f"Bearer {KEY}"})
    direct = Poster(mock, {})
    for _ in range(args.warmup):
        client.post()
        direct.post()
    roles = {port: "ingress" for port in ports_of(pids[0])} | {port: "worker" for port in ports_of(pids[1])}
    seen: list[tuple[float, str, str]] = []
    stop, ready = threading.Event(), threading.Event()
    thread = threading.Thread(target=record, args=(url, seen, stop, ready), daemon=True)
    thread.start()
    ready.wait(5)
    marker = redis.Redis.from_url(url)
    spans: list[tuple[float, float, int, int]] = []
    direct_ms: list[float] = []
    for _ in range(args.requests):
        t0 = time.perf_counter()
        direct.post()
        direct_ms.append((time.perf_counter() - t0) * 1000)
        time.sleep(0.005)  # the previous request's bookkeeping lands before the next send
        begin = len(seen)
        sent = time.time()
        client.post()
        got = time.time()
        time.sleep(0.02)
        spans.append((sent, got, begin, len(seen)))
    stop.set()
    marker.echo("c1-timeline-stop")
    thread.join(5)
    roles |= {port: "ingress" for port in ports_of(pids[0])} | {port: "worker" for port in ports_of(pids[1])}
    rows = []
    for sent, got, begin, end in spans:
        window = [(t, roles.get(int(addr or 0), "?"), label(line)) for t, addr, line in seen[begin:end]]
        mine = [(t, who, name) for t, who, name in window if sent <= t <= got + 0.02 and who != "?"]
        rows.append((sent, got, mine))
    shape = Counter(tuple((who, name) for _, who, name in mine) for _, _, mine in rows).most_common(1)[0][0]
    typical = [(sent, got, mine) for sent, got, mine in rows if tuple((w, n) for _, w, n in mine) == shape]
    print(f"{len(typical)} of {len(rows)} requests share the most common sequence of {len(shape)} commands")
    print(f"direct to mock: p50 {statistics.median(direct_ms):.3f} ms\n")
    print("| step | by | at (ms from send, median) | gap from the step before (ms) |\n|---|---|---|---|")
    last = 0.0
    offsets = []
    for i, (who, name) in enumerate(shape):
        at = statistics.median((mine[i][0] - sent) * 1000 for sent, _, mine in typical)
        offsets.append(at)
        print(f"| {name} | {who} | {at:.3f} | {at - last:.3f} |")
        last = at
    total = statistics.median((got - sent) * 1000 for sent, got, _ in typical)
    print(f"| answer received | client | {total:.3f} | {total - last:.3f} |")
    all_totals = sorted((got - sent) * 1000 for sent, got, _ in rows)
    p99 = all_totals[min(len(all_totals) - 1, int(len(all_totals) * 0.99))]
    added = statistics.median(all_totals) - statistics.median(direct_ms)
    print(
        f"\nend to end p50 {statistics.median(all_totals):.3f} ms, p99 {p99:.3f} ms; added p50 over direct {added:.3f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
