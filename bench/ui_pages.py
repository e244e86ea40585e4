#!/usr/bin/env python3
"""Dashboard page times with a full records stream (100,000 attempt records by default).

Starts redis, the simulator, one worker and an ingress with the dashboard
test configuration (`tests/support/dashboard.py`), writes `--records`
synthetic attempt records straight into the records stream (requests of 1 to
3 attempts from two orgs, spread over the last six days, so Spend's 7-day
window holds all of them), then times each page over HTTP (login cookie,
`--reps` loads each, median and worst, in ms, wall clock on this machine).
One JSON line per page.

Usage: .venv/bin/python bench/ui_pages.py [--records 100000] [--reps 20]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec
import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from support.dashboard import ACME_ADMIN, OPERATOR, make_traffic, start_dashboard
from support.echo_upstream import EchoUpstream
from support.procs import Fleet
from turnout.state import keys

_encode = msgspec.json.Encoder()


def seed(redis_url: str, records: int, rng: random.Random) -> None:
    """Write about `records` rows, oldest first, each with a stream id at its `ts`."""
    client = redis.Redis.from_url(redis_url)
    now = time.time()
    span_s = 6 * 86_400.0
    written = 0
    pipe = client.pipeline(transaction=False)
    n = 0
    while written < records:
        rid = f"seed{n:08d}"
        n += 1
        org = "acme" if rng.random() < 0.7 else "beta"
        ts = now - span_s + span_s * written / records
        attempts = rng.choice((1, 1, 1, 2, 3))
        model = rng.choice(("chat", "small", "chat", "rare" if rng.random() < 0.02 else "chat"))
        for a in range(1, attempts + 1):
            last = a == attempts
            row: dict[str, Any] = {
                "ts": round(ts + a * 0.3, 3),
                "request_id": rid,
                "org": org,
                "squad": "research" if org == "acme" else None,
                "key": "ci-bot" if org == "acme" else "app",
                "requested_model": model,
                "served_model": "chat-b" if a == attempts else "chat-a~503",
                "provider": "sim-b" if last else "sim-a",
                "attempt": a,
                "status": 200 if last else 503,
                "class": "success" if last else "retry_then_fallback",
                "kind": "success" if last else "server_error",
                "latency_ms": 120.0,
                "input_tokens": 100 if last else 0,
                "output_tokens": 50 if last else 0,
                "cost_usd": 0.00105 if last else 0.0,
                "is_retry": a == 2 and attempts == 3,
                "is_fallback": last and a > 1,
                "is_reroute": False,
                "is_byok_fallback": False,
                "is_strategy": False,
                "role": "provider_fallback" if last and a > 1 else "primary",
                "delay_before_s": 0.25 if a == 2 else 0.0,
                "delay_reason": "backoff" if a == 2 and attempts == 3 else None,
            }
            pipe.xadd(keys.RECORDS_STREAM, {"org": org, "r": _encode.encode(row)}, id=f"{int(row['ts'] * 1000)}-*")
            written += 1
        if len(pipe) >= 2000:
            pipe.execute()
    pipe.execute()
    client.close()


def login(base: str, key: str) -> httpx.Cookies:
    r = httpx.post(
        f"{base}/ui/login", content=f"key={key}", headers={"content-type": "application/x-www-form-urlencoded"}
    )
    return r.cookies


def timed(client: httpx.Client, path: str, reps: int) -> dict[str, Any]:
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        r = client.get(path)
        times.append((time.perf_counter() - started) * 1000.0)
        r.raise_for_status()
    return {"median_ms": round(statistics.median(times), 1), "max_ms": round(max(times), 1), "bytes": len(r.content)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    echo, fleet = EchoUpstream(), Fleet()
    try:
        gw = start_dashboard(fleet, echo)
        seed(gw.redis_url, args.records, random.Random(7))
        make_traffic(gw)
        stream_len = redis.Redis.from_url(gw.redis_url).xlen(keys.RECORDS_STREAM)
        operator = httpx.Client(base_url=gw.base_url, cookies=login(gw.base_url, OPERATOR), timeout=60)
        acme = httpx.Client(base_url=gw.base_url, cookies=login(gw.base_url, ACME_ADMIN), timeout=60)
        page = operator.get("/ui/activity").text
        deep = "/ui/activity"
        for _ in range(10):  # the 11th page, following "Older"
            start = page.index('id="older"') if 'id="older"' in page else -1
            href = page[page.rindex('href="', 0, start) + 6 : page.index('"', page.rindex('href="', 0, start) + 6)]
            deep = href.replace("&amp;", "&")
            page = operator.get(deep).text
        link = page.index("/ui/requests/")
        detail = page[link : page.index('"', link)].replace("&amp;", "&")
        pages = [
            ("activity, operator, newest", operator, "/ui/activity"),
            ("activity, org admin, newest", acme, "/ui/activity"),
            ("activity, live fragment", operator, "/ui/activity?fragment=1"),
            ("activity, 11th page (cursor)", operator, deep),
            ("activity, filter model=rare (~1% of requests)", operator, "/ui/activity?model=rare"),
            (
                "activity, filter matching nothing (stops at the 20,000-record read limit)",
                operator,
                "/ui/activity?model=none",
            ),
            ("request detail, linked from the 11th page (at=)", operator, detail),
            ("providers", operator, "/ui/providers"),
            ("spend, operator (reads the 7-day window)", operator, "/ui/spend"),
            ("spend, org admin", acme, "/ui/spend"),
        ]
        print(json.dumps({"records_in_stream": stream_len}))
        for name, client, path in pages:
            print(json.dumps({"page": name, **timed(client, path, args.reps)}))
    finally:
        fleet.stop_all()
        echo.stop()


if __name__ == "__main__":
    main()
