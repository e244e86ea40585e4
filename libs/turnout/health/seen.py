"""The latest snapshot one process has seen of each breaker subject (a target or a tenant credential).

Owns: keeping, per subject, the newest versioned snapshot seen (read, written by
this process, or met in a conflicting write) and when it was seen, so a read kept
a moment (`turnout.health.reads`) shows this process's own writes and a write
(`turnout.health.writes`) starts from the newest snapshot known.
Must not import: services, FastAPI, httpx, Redis.
"""

from __future__ import annotations

from turnout.core.breaker import CLOSED
from turnout.state.breaker_store import Versioned

KNOWN_MAX = 100_000
"""Subjects whose latest snapshot a process remembers at most."""
UNKNOWN = Versioned(0, CLOSED)
"""What a subject never seen is taken to be."""


def later(a: tuple[float, Versioned], b: tuple[float, Versioned]) -> bool:
    """Whether (seen at, entry) `a` is later than `b`: seen later, or at the same time with a higher version."""
    return a[0] > b[0] or (a[0] == b[0] and a[1].version > b[1].version)


class LatestSeen:
    """Subject -> (seen at, the latest snapshot seen); seen at is monotonic seconds."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[float, Versioned]] = {}

    def note(self, subject: str, entry: Versioned | None, seen_at: float) -> None:
        """Keep `entry`, seen at `seen_at` (monotonic s), as the latest known of `subject` unless
        one seen later is kept. Seen, not versioned: versions start again when keys are lost."""
        if entry is not None and ((known := self._known.get(subject)) is None or not later(known, (seen_at, entry))):
            if known is None and len(self._known) >= KNOWN_MAX:
                self._known.clear()  # forgetting only costs a conflicting write
            self._known[subject] = (seen_at, entry)

    def latest(self, subject: str) -> Versioned:
        """The latest snapshot seen of `subject` (`UNKNOWN` when none)."""
        known = self._known.get(subject)
        return known[1] if known is not None else UNKNOWN

    def seen_since(self, subject: str, entry: Versioned, read_at: float) -> Versioned | None:
        """The snapshot of `subject` seen after `entry` was read at `read_at` (monotonic s), if any."""
        known = self._known.get(subject)
        return known[1] if known is not None and later(known, (read_at, entry)) else None
