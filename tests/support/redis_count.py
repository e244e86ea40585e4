"""Count the Redis commands one request costs, as the server saw them (`MONITOR`).

Owns: attributing the commands Redis ran to one request. A `MONITOR`
connection records every command in the server's order; before and after
each request the counting client sends a marker (`ECHO`), so the request's
commands are those between its two markers. The end marker is sent once no
command arrived for `SETTLE_S` after the answer (a worker's bookkeeping after
delivering runs then). Two figures per request: commands the clients sent
(each a network command Redis parses and dispatches; an `EVALSHA` counts
once) and, apart, the commands the Lua scripts ran inside.

A background loop (a worker's periodic scan, a lease renewal, the catalog's
and the tenancy's version polls) may land inside one request's window; it
only ever adds commands, and a request's own commands are the same every
time, so the figure is the fewest over many sequential requests (the
typical request's commands are those of that window). The attempt records
are written by the records writer's flusher (`turnout.observability.records`,
one script run per batch: per attempt a started row — `XADD`, `HSET` +
`EXPIRE` of the open-attempts hash — flushed at once, and an ended row —
`XADD`, `HDEL` — batched, every
0.25 s), so they are counted apart (`records`): under load one flush carries
many attempts' rows.
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import redis

SETTLE_S = 0.05
"""A request's window closes once no command arrived for this long after its answer (seconds)."""

RECORDS = (
    "xadd turnout:records ",
    "hset turnout:attempts:open:",
    "expire turnout:attempts:open:",
    "hdel turnout:attempts:open:",
)
"""Writes of the attempt records' writer, lower-cased (counted apart, `RequestCommands.records`): run
by its script (`turnout.state.records_stream.append`), whose own `EVALSHA` / `EVAL` is apart too."""


def _records_write(line: str) -> bool:
    """A write of the records' script (see `RECORDS`)."""
    return line.lower().startswith(RECORDS)


def _records_script(line: str) -> bool:
    """The records' script itself: `EVALSHA <sha> <numkeys> turnout:records ...` (or `EVAL`)."""
    parts = line.split(" ", 4)
    return len(parts) >= 4 and parts[0].upper() in ("EVALSHA", "EVAL") and parts[3] == "turnout:records"


@dataclass
class _Seen:
    """Commands recorded by the monitor thread: (client kind, command name, full command)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    commands: list[tuple[str, str, str]] = field(default_factory=list)
    last_at: float = 0.0


def _monitor(url: str, seen: _Seen, ready: threading.Event, stop: threading.Event) -> None:
    client = redis.Redis.from_url(url)
    try:
        with client.monitor() as mon:  # type: ignore[no-untyped-call]
            ready.set()
            for event in mon.listen():
                line = str(event.get("command", ""))
                with seen.lock:
                    seen.commands.append((str(event.get("client_type", "")), line.split(" ", 1)[0].lower(), line))
                    seen.last_at = time.monotonic()
                if stop.is_set() and "turnout-count-stop" in line:
                    return
    finally:
        client.close()  # type: ignore[no-untyped-call]  # untyped in redis-py 5.2


@dataclass
class RequestCommands:
    """Per-request Redis command figures over sequential requests."""

    per_request: list[int]
    """Commands the clients sent, per request (script internals not counted)."""
    inside_scripts: list[int]
    """Commands Lua scripts ran, per request."""
    breakdown: Counter[str]
    """The client commands of the request with the fewest (name -> calls)."""
    commands: list[str] = field(default_factory=list)
    """That request's commands in order (scripts' inner commands prefixed `lua:`), truncated."""
    records: int = 0
    """Attempt-record writes (`RECORDS`) seen over all the windows."""

    fewest_inside_scripts: int = 0
    """Commands Lua scripts ran in that request's window."""

    @property
    def fewest(self) -> int:
        """Client commands of one request: the fewest over the windows (module doc)."""
        return min(self.per_request)

    @property
    def median(self) -> float:
        """Median client commands per window (background loops included: for information)."""
        return float(statistics.median(self.per_request))


def _window(seen: _Seen, start: str, end: str) -> list[tuple[str, str, str]]:
    with seen.lock:
        lines = list(seen.commands)
    begin = next(i for i, c in enumerate(lines) if start in c[2])
    finish = next(i for i, c in enumerate(lines) if end in c[2])
    return lines[begin + 1 : finish]


def _mark(client: redis.Redis, seen: _Seen, text: str) -> None:
    client.echo(text)
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        with seen.lock:
            if any(text in c[2] for c in seen.commands[-50:]):
                return
        time.sleep(0.002)


def _settle(seen: _Seen) -> None:
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        with seen.lock:
            quiet = time.monotonic() - seen.last_at
        if quiet >= SETTLE_S:
            return
        time.sleep(0.005)


def commands_per_request(redis_url: str, send: Callable[[], None], n: int = 20, warmup: int = 3) -> RequestCommands:
    """Send `n` requests one after another (after `warmup` unmeasured ones) and count each one's commands.

    Args:
        redis_url: the fleet's Redis.
        send: sends one request and returns once it is answered (raises on a bad answer).
        n: measured requests.
        warmup: requests sent first, not measured (script loads, first connections).
    """
    for _ in range(warmup):
        send()
    seen, ready, stop = _Seen(), threading.Event(), threading.Event()
    thread = threading.Thread(target=_monitor, args=(redis_url, seen, ready, stop), daemon=True)
    thread.start()
    ready.wait(5)
    client = redis.Redis.from_url(redis_url)
    tag = uuid.uuid4().hex[:8]
    try:
        _settle(seen)
        sent: list[int] = []
        inner: list[int] = []
        windows: list[list[tuple[str, str, str]]] = []
        records = 0
        for i in range(n):
            _mark(client, seen, f"turnout-count-{tag}-{i}-start")
            send()
            _settle(seen)
            _mark(client, seen, f"turnout-count-{tag}-{i}-end")
            window = _window(seen, f"turnout-count-{tag}-{i}-start", f"turnout-count-{tag}-{i}-end")
            records += sum(1 for _, _, line in window if _records_write(line))
            window = [c for c in window if not (_records_write(c[2]) or _records_script(c[2]))]
            windows.append(window)
            sent.append(sum(1 for kind, _, _ in window if kind != "lua"))
            inner.append(sum(1 for kind, _, _ in window if kind == "lua"))
        least = sent.index(min(sent))
        typical = windows[least]
        return RequestCommands(
            per_request=sent,
            inside_scripts=inner,
            fewest_inside_scripts=inner[least],
            breakdown=Counter(name for kind, name, _ in typical if kind != "lua"),
            commands=[("lua:" if kind == "lua" else "") + line[:120] for kind, _, line in typical],
            records=records,
        )
    finally:
        stop.set()
        client.echo("turnout-count-stop")
        thread.join(5)
        client.close()  # type: ignore[no-untyped-call]  # untyped in redis-py 5.2
