"""Requests through the gateway and the figures made from them.

Owns: one chat call with the SDK (`max_retries=0`) reduced to a `Call`, the
open-loop sender, retry hints (RFC 9110 `Retry-After`, `retry-after-ms`),
and the pure reductions over calls and simulator log entries (per-second
bins, in-flight maximum, shares).
Must not import: the fleet; everything but `chat` and `open_loop` is pure.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import hashlib
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

import openai

MAX_IN_FLIGHT = 400
"""Open-loop requests outstanding at once; a send beyond it is counted as status None."""


@dataclass(frozen=True, slots=True)
class Call:
    """One request through the gateway.

    Attributes:
        sent_s / done_s: epoch seconds.
        status: HTTP status, or None for a transport error or client timeout.
        provider: `x-turnout-provider` of a success, else None.
        hint_s: the answer's retry hint in seconds (`retry-after-ms`, else
            `Retry-After` as seconds or HTTP-date), or None.
    """

    sent_s: float
    done_s: float
    status: int | None
    provider: str | None = None
    hint_s: float | None = None

    @property
    def ok(self) -> bool:
        """True for a 200."""
        return self.status == 200


def retry_hint_s(headers: Mapping[str, str], clock: Callable[[], float] = time.time) -> float | None:
    """`retry-after-ms` (ms) or `Retry-After` (seconds or HTTP-date, RFC 9110 §10.2.3) in seconds.

    `clock` gives epoch seconds, for an HTTP-date (injected by tests)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        with contextlib.suppress(ValueError):
            return max(0.0, float(ms) / 1000)
    value = headers.get("retry-after")
    if value is None:
        return None
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    with contextlib.suppress(TypeError, ValueError):
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - clock())
    return None


async def chat(client: openai.AsyncOpenAI, model: str) -> Call:
    """One non-streaming chat completion; never raises for HTTP or transport failures."""
    sent_s = time.time()
    try:
        raw = await client.chat.completions.with_raw_response.create(
            model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=4
        )
        return Call(sent_s, time.time(), raw.http_response.status_code, raw.headers.get("x-turnout-provider"))
    except openai.APIStatusError as exc:
        return Call(sent_s, time.time(), exc.status_code, None, retry_hint_s(exc.response.headers))
    except (openai.APIConnectionError, openai.APITimeoutError):
        return Call(sent_s, time.time(), None)


async def open_loop(
    send: Callable[[], Coroutine[Any, Any, Call]], rate_per_s: float, run_s: float, grace_s: float
) -> list[Call]:
    """Send at a fixed rate for `run_s` (not waiting for answers), then wait `grace_s` at most.

    Returns:
        The calls that completed, sorted by send time; a send that would
        exceed `MAX_IN_FLIGHT` or that is still open after the grace is
        returned as status None with `done_s` = the moment it was given up.
    """
    t0, count = time.monotonic(), int(rate_per_s * run_s)
    tasks: list[asyncio.Task[Call]] = []
    skipped: list[Call] = []
    for i in range(count):
        await asyncio.sleep(max(0.0, t0 + i / rate_per_s - time.monotonic()))
        if sum(not t.done() for t in tasks) >= MAX_IN_FLIGHT:
            now = time.time()
            skipped.append(Call(now, now, None))
            continue
        tasks.append(asyncio.create_task(send()))
    done, pending = await asyncio.wait(tasks, timeout=grace_s) if tasks else (set(), set())
    given_up_s = time.time()
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    calls = [t.result() for t in done] + skipped + [Call(given_up_s, given_up_s, None) for _ in pending]
    return sorted(calls, key=lambda c: c.sent_s)


def statuses(calls: list[Call]) -> dict[str, int]:
    """Count of calls per status (`"none"` for transport errors and timeouts)."""
    out: dict[str, int] = {}
    for c in calls:
        name = "none" if c.status is None else str(c.status)
        out[name] = out.get(name, 0) + 1
    return dict(sorted(out.items()))


def share(part: int, whole: int) -> float | None:
    """part / whole rounded to 4 places, None when whole is 0."""
    return round(part / whole, 4) if whole else None


def per_second(times_s: list[float], start_s: float, seconds: int) -> list[int]:
    """How many of `times_s` fall in each 1-s bin [start_s + i, start_s + i + 1)."""
    bins = [0] * seconds
    for t in times_s:
        i = int(t - start_s) if t >= start_s else -1
        if 0 <= i < seconds:
            bins[i] += 1
    return bins


def peak_per_window(times_s: list[float], since_s: float, until_s: float, window_s: float = 1.0) -> int:
    """Most of `times_s` within [since_s, until_s] that fit in any window [t, t + window_s)."""
    inside = sorted(t for t in times_s if since_s <= t <= until_s)
    best, first = 0, 0
    for last, t in enumerate(inside):
        while inside[first] <= t - window_s:
            first += 1
        best = max(best, last - first + 1)
    return best


def max_in_flight(entries: list[dict[str, Any]], since_s: float, until_s: float) -> int:
    """Most simulator entries open at once within [since_s, until_s] (open: `ended_s` null)."""
    events: list[tuple[float, int]] = []
    for e in entries:
        start, end = float(e["t_s"]), e["ended_s"]
        end = until_s if end is None else min(float(end), until_s)
        if end < since_s or start > until_s:
            continue
        events += [(max(start, since_s), 1), (end, -1)]
    best = current = 0
    for _, delta in sorted(events, key=lambda ev: (ev[0], ev[1])):  # ends before starts at one instant
        current += delta
        best = max(best, current)
    return best


def fingerprint(key: str) -> str:
    """The simulator's `auth_fingerprint` of `Authorization: Bearer <key>`."""
    return hashlib.sha256(f"Bearer {key}".encode()).hexdigest()[:8]
