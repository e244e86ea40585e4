"""The latest snapshot one process has seen of each breaker subject (a target or a tenant credential).

Owns: keeping, per subject, the newest versioned snapshot seen (read, written by
this process, or met in a conflicting write) and when it was seen, so a read kept
a moment (`turnout.health.reads`) shows this process's own writes and a write
(`turnout.health.writes`) starts from the newest snapshot known.
Must not import: services, FastAPI, httpx, Redis.

Bounded (issue #40): subjects include tenants' custom endpoints' models, named by tenants, so
the memory is a least-recently-noted cache of `KNOWN_MAX` subjects: noting a subject makes it
the newest, and noting one more than the cap forgets the one noted longest ago. Forgetting a
subject only costs its next write a compare-and-set conflict (one more round trip) and a read
kept a moment not showing this process's own last write to it, which the next read does.
"""

from __future__ import annotations

from collections import OrderedDict

from turnout.core.breaker import CLOSED
from turnout.state.breaker_store import Versioned

KNOWN_MAX = 4096
"""Subjects whose latest snapshot a process remembers at most (the least recently noted go
first): the targets and tenant credentials in use at once, as the health reads' own cache
(`turnout.health.reads.CACHE_MAX`). 10,500 tenant-chosen model names grew a worker by 6.4 MiB
when it was 100,000 (`bench/worker_memory.py`, README "Bounded memory")."""
UNKNOWN = Versioned(0, CLOSED)
"""What a subject never seen is taken to be."""


def later(a: tuple[float, Versioned], b: tuple[float, Versioned]) -> bool:
    """Whether (seen at, entry) `a` is later than `b`: seen later, or at the same time with a higher version."""
    return a[0] > b[0] or (a[0] == b[0] and a[1].version > b[1].version)


class LatestSeen:
    """Subject -> (seen at, the latest snapshot seen); seen at is monotonic seconds."""

    def __init__(self, capacity: int = KNOWN_MAX) -> None:
        self._known: OrderedDict[str, tuple[float, Versioned]] = OrderedDict()
        self._capacity = capacity

    def __len__(self) -> int:
        """Subjects remembered now (at most the capacity)."""
        return len(self._known)

    def note(self, subject: str, entry: Versioned | None, seen_at: float) -> None:
        """Keep `entry`, seen at `seen_at` (monotonic s), as the latest known of `subject` unless
        one seen later is kept; either way `subject` becomes the most recently noted (module doc).
        Seen, not versioned: versions start again when keys are lost."""
        if entry is None:
            return
        known = self._known.get(subject)
        if known is None or not later(known, (seen_at, entry)):
            self._known[subject] = (seen_at, entry)
        self._known.move_to_end(subject)
        if len(self._known) > self._capacity:
            self._known.popitem(last=False)  # forgetting only costs a conflicting write

    def latest(self, subject: str) -> Versioned:
        """The latest snapshot seen of `subject` (`UNKNOWN` when none)."""
        known = self._known.get(subject)
        return known[1] if known is not None else UNKNOWN

    def seen_since(self, subject: str, entry: Versioned, read_at: float) -> Versioned | None:
        """The snapshot of `subject` seen after `entry` was read at `read_at` (monotonic s), if any."""
        known = self._known.get(subject)
        return known[1] if known is not None and later(known, (read_at, entry)) else None
