"""The breaker timeline's events: each stored transition of a target, written to a bounded stream.

Owns: the event a breaker write makes when it moves a target's standing (`transition_events`,
pure: opened by a trip, opened again by a failed probe, closed by a successful probe, resting on
a provider's Retry-After) and `BreakerLog`, the hook (`turnout.health.BreakerHooks.on_step`)
that writes them in the background to `turnout.state.transitions_stream`. Only target
subjects (`provider/model`) are logged: an org's own credential is not a fleet fact.
Transitions are rare; a plain request's write moves no standing and writes nothing here.
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import msgspec
from redis.asyncio import Redis

from turnout.core.breaker import BreakerSnapshot
from turnout.state import transitions_stream
from turnout.state.errors import StateUnavailable

log = logging.getLogger("turnout.breaker")

OPENED, REOPENED, CLOSED, RESTING = "opened", "reopened", "closed", "resting"
"""An event's `event`: a trip; a failed probe (open again, longer cooldown); a successful
probe; a provider's Retry-After (no attempt before `until`)."""

_encode = msgspec.json.Encoder()


def transition_events(subject: str, old: BreakerSnapshot, new: BreakerSnapshot, at_s: float) -> list[dict[str, Any]]:
    """The events of one stored step of `subject` from `old` to `new` at store-clock `at_s` (epoch s).

    Each is `{ts, target, event, ...}`: `opened` / `reopened` with `cooldown_s`, `trips`,
    `rule` and `error` (the scrubbed last counted failure); `closed`; `resting` with `until`
    (epoch s). Empty when the step moved no standing.
    """
    out: list[dict[str, Any]] = []
    base = {"ts": round(at_s, 3), "target": subject}
    if new.open and (not old.open or new.opened_at_s != old.opened_at_s):
        out.append(
            base
            | {
                "event": REOPENED if old.open else OPENED,
                "cooldown_s": round(new.cooldown_s, 3),
                "trips": new.trips,
                "rule": new.trip_rule,
                "error": new.last_error[:200],
            }
        )
    elif old.open and not new.open:
        out.append(base | {"event": CLOSED})
    if new.not_before_s > old.not_before_s and new.not_before_s > at_s:
        out.append(base | {"event": RESTING, "until": round(new.not_before_s, 3)})
    return out


class BreakerLog:
    """Writes target transitions to the bounded stream in the background (never blocks the caller).

    Args:
        redis: the process's client.
        wall: epoch seconds (the stream's age bound).
    """

    def __init__(self, redis: Redis, wall: Callable[[], float] = time.time) -> None:
        self._redis = redis
        self._wall = wall
        self._tasks: set[asyncio.Task[None]] = set()

    def step(self, subject: str, old: BreakerSnapshot, new: BreakerSnapshot, at_s: float) -> None:
        """The `BreakerHooks.on_step` hook: queue the write of the step's events, if any (a target's only)."""
        if "/" not in subject:
            return
        events = transition_events(subject, old, new, at_s)
        if not events:
            return
        try:
            task = asyncio.get_running_loop().create_task(self._write([_encode.encode(e) for e in events]))
        except RuntimeError:  # no running loop (a synchronous test): nothing to write with
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, events: list[bytes]) -> None:
        try:
            await transitions_stream.append(self._redis, events, now_s=self._wall())
        except StateUnavailable as exc:
            log.warning("breaker transitions not written (%s)", exc)

    async def drain(self) -> None:
        """Wait for the writes started so far (a process stopping, a test)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
