"""One request's read of breaker health: the snapshots of its targets and credentials,
their measures and usage caps, as of one moment, and what routing asks of them (SPEC §5
"Ordering", §10). A read may be kept a moment by `turnout.health.reads.HealthReads` (`cache_s`)
or shipped with a job; its age is carried with it.
Must not import: services, FastAPI, httpx, Redis.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from turnout.core.breaker import (
    CLOSED,
    BreakerSettings,
    BreakerSnapshot,
    BreakerState,
    score,
    state_at,
    unavailable_for_s,
)
from turnout.core.ordering import Standing, TargetHealth
from turnout.state.breaker_store import Loaded, cap_subject

Clock = Callable[[], float]


class HealthView:
    """Snapshots of one request's targets and credentials, as read at one moment.

    Attributes:
        now_s: store clock at the read (epoch seconds).
        entries: subject -> versioned snapshot.
        speeds: target key -> the fleet's rolling measures (measured targets only).
        caps: `cap_subject` -> epoch seconds until that usage cap resets
            (only caps read and in force).
        read_at: local monotonic time of the read (seconds).
        degraded: the store was unreachable; everything reads CLOSED.
    """

    def __init__(
        self, loaded: Loaded, *, clock: Clock = time.monotonic, degraded: bool = False, age_s: float = 0.0
    ) -> None:
        self.now_s = loaded.now_s
        self.entries = dict(loaded.entries)
        self.speeds = dict(loaded.speeds)
        self.caps = dict(loaded.caps)
        self._clock = clock
        self.read_at = clock() - age_s  # a view read elsewhere `age_s` seconds ago (one shipped with a job)
        self.degraded = degraded

    def loaded(self) -> Loaded | None:
        """What was read, to ship with a job (`JobPayload.health`); None for a degraded view."""
        if self.degraded:
            return None
        return Loaded(now_s=self.now_s, entries=self.entries, speeds=self.speeds, caps=self.caps)

    def refresh(self, loaded: Loaded) -> None:
        """Take newer snapshots (and the clock read with them)."""
        self.entries.update(loaded.entries)
        self.speeds.update(loaded.speeds)
        self.now_s, self.read_at = loaded.now_s, self._clock()

    def age_s(self) -> float:
        """Seconds since the last read."""
        return self._clock() - self.read_at

    def store_now(self) -> float:
        """The store clock now, extrapolated from the read."""
        return self.now_s + self.age_s()

    def snapshot(self, subject: str) -> BreakerSnapshot:
        """The snapshot of `subject` (CLOSED when unknown)."""
        entry = self.entries.get(subject)
        return entry.snapshot if entry else CLOSED

    def ordering_health(self, settings: BreakerSettings) -> dict[str, TargetHealth]:
        """target key -> what the ordering strategies know of it (SPEC §5 "Ordering",
        §10): standing, score and measures; targets CLOSED with no history and
        no measure are left out (they rank as healthy and unmeasured)."""
        now = self.store_now()
        out: dict[str, TargetHealth] = {}
        for subject, entry in self.entries.items():
            snap = entry.snapshot
            speed = self.speeds.get(subject)
            if snap == CLOSED:
                if speed is not None:
                    out[subject] = TargetHealth(ttft_ms=speed.ttft_ms, tokens_per_s=speed.tokens_per_s)
                continue
            away = unavailable_for_s(snap, now)
            if away > 0:
                standing = Standing.DOWN
            elif state_at(snap, now) is BreakerState.HALF_OPEN:
                standing = Standing.PROBE
            else:
                standing = Standing.UP
            out[subject] = TargetHealth(
                score=score(snap, now, settings),
                standing=standing,
                back_in_s=away,
                ttft_ms=speed.ttft_ms if speed else None,
                tokens_per_s=speed.tokens_per_s if speed else None,
            )
        return out

    def capped_for(self, scope: str, target: str) -> float | None:
        """Seconds until the usage cap of `scope` on `target` resets, or None
        when none is known (SPEC §10 plan-cap continuity)."""
        until = self.caps.get(cap_subject(scope, target))
        if until is None:
            return None
        left = until - self.store_now()
        return left if left > 0 else None

    def unavailable_for(self, targets: Sequence[str]) -> float | None:
        """Seconds until the first of `targets` may be attempted again, if every
        one is OPEN or resting now; else None."""
        if not targets or self.degraded:
            return None
        now = self.store_now()
        waits = [unavailable_for_s(self.snapshot(t), now) for t in targets]
        return None if min(waits) <= 0 else min(waits)
