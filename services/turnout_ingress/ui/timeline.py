"""A target's breaker states over a window, from its recorded transitions (the Providers timeline).

Owns: turning the events of `turnout.observability.breaker_log` (opened, reopened, closed,
resting) into the states a target was in over time — `closed`, `open` (cooling down),
`half_open` (past its cooldown: one probe admitted fleet-wide), `resting` (a provider's
Retry-After in force while closed) — as segments, and the events as markers with words.
Pure: no I/O, no clock.
Must not import: FastAPI, Redis.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

STATES = ("closed", "open", "half_open", "resting")
"""A segment's state, as the timeline draws and words it (`WORDS`)."""
WORDS = {
    "closed": "closed",
    "open": "open (cooling down)",
    "half_open": "half-open (probe allowed)",
    "resting": "resting (Retry-After)",
}


class Event(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded transition (`turnout.observability.breaker_log.transition_events`)."""

    ts: float
    target: str
    event: str
    cooldown_s: float = 0.0
    trips: int = 0
    rule: str = ""
    error: str = ""
    until: float = 0.0


_decode = msgspec.json.Decoder(Event)


def decode(raw: Iterable[bytes]) -> list[Event]:
    """The events of encoded stream entries, oldest first by `ts` (undecodable entries left out)."""
    out: list[Event] = []
    for item in raw:
        try:
            out.append(_decode.decode(item))
        except msgspec.DecodeError:
            continue
    out.sort(key=lambda e: e.ts)
    return out


def by_target(events: Iterable[Event]) -> dict[str, list[Event]]:
    """`events` grouped per target, each oldest first."""
    out: dict[str, list[Event]] = {}
    for e in events:
        out.setdefault(e.target, []).append(e)
    return out


def state_at(events: Sequence[Event], t: float) -> str:
    """The state at `t` (epoch s) from a target's events (oldest first): closed before any."""
    opened: Event | None = None
    resting_until = 0.0
    for e in events:
        if e.ts > t:
            break
        if e.event in ("opened", "reopened"):
            opened = e
        elif e.event == "closed":
            opened = None
        elif e.event == "resting":
            resting_until = max(resting_until, e.until)
    if opened is not None:
        return "open" if t < opened.ts + opened.cooldown_s else "half_open"
    return "resting" if t < resting_until else "closed"


Segment = tuple[float, float, str]
"""(start, end, state): epoch seconds, `start < end`, one of `STATES`."""


def segments(events: Sequence[Event], start_s: float, end_s: float, samples: int = 240) -> list[Segment]:
    """A target's states over [`start_s`, `end_s`] (`end_s > start_s`), as consecutive segments
    covering the window: its state at each event inside it and at `samples` evenly spaced times."""
    step = (end_s - start_s) / samples
    cuts = {start_s + i * step for i in range(samples)}
    for e in events:
        for t in (e.ts, e.ts + e.cooldown_s, e.until):
            if start_s < t < end_s:
                cuts.add(t)
    times = sorted(cuts)
    out: list[Segment] = []
    for i, t in enumerate(times):
        nxt = times[i + 1] if i + 1 < len(times) else end_s
        state = state_at(events, t)
        if out and out[-1][2] == state:
            out[-1] = (out[-1][0], nxt, state)
        else:
            out.append((t, nxt, state))
    return out


def marker_words(e: Event) -> str:
    """What happened at event `e`, in words, with its UTC time (for a marker's title)."""
    at = time.strftime("%H:%M:%S", time.gmtime(e.ts))
    if e.event == "opened":
        return f"{at} opened (trip {e.trips}, {e.rule or 'rule'}) for {e.cooldown_s:g} s: {e.error}".rstrip(": ")
    if e.event == "reopened":
        return f"{at} probe failed, open again for {e.cooldown_s:g} s: {e.error}".rstrip(": ")
    if e.event == "closed":
        return f"{at} probe succeeded, closed (slow start)"
    if e.event == "resting":
        return f"{at} resting on the provider's Retry-After until {time.strftime('%H:%M:%S', time.gmtime(e.until))}"
    return f"{at} {e.event}"


def counts(events: Iterable[Event]) -> Mapping[str, int]:
    """How many events of each kind (`opened`, `reopened`, `closed`, `resting`)."""
    out: dict[str, int] = {}
    for e in events:
        out[e.event] = out.get(e.event, 0) + 1
    return out


def as_rows(events: Iterable[Event]) -> list[dict[str, Any]]:
    """The events as table rows: time, target, event and words, newest first."""
    return [
        {"ts": e.ts, "target": e.target, "event": e.event, "words": marker_words(e)} for e in reversed(list(events))
    ]
