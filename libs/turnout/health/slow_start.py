"""Slow start after a close (SPEC §5): by rate, fleet-wide, or by this process's share of the offered attempts.

Owns: the ramp by rate (`slow_start_rps` > 0, the default): each attempt a CLOSED target
in slow start admits takes one call of `turnout.core.ramp.ramp_rate` from the store's
shared counter (`BreakerStore.take_ramp_slot`), so the whole fleet sends it at most the
ramp's calls per second whatever the offered load; and the share (`slow_start_rps: 0`): the
pacing credit per target and close, so the share of attempts a process lets through rises
with `turnout.core.breaker.ramp_share` and is spread evenly (`turnout.core.breaker.pace`).
Must not import: services, FastAPI, httpx, Redis.
"""

from __future__ import annotations

from turnout.core.breaker import BreakerSettings, BreakerSnapshot, pace, ramp_share
from turnout.core.ramp import ramp_rate
from turnout.state.breaker_store import BreakerStore


class SlowStart:
    """Pacing credits of the targets in slow start.

    Args:
        settings: thresholds (the ramp's length, first share and rate).
        store: the shared rate counters (the ramp by rate).
    """

    def __init__(self, settings: BreakerSettings, store: BreakerStore) -> None:
        self._settings = settings
        self._store = store
        self._credits: dict[str, tuple[float, float]] = {}  # target -> (closed_at_s, slow-start credit)

    def draw(self, target: str, snap: BreakerSnapshot, now_s: float) -> float:
        """The slow-start draw of this process for `target` at store-clock `now_s` (epoch s):
        0.0 (admit) or 1.0 (leave out), for `turnout.core.breaker.admit`."""
        share = ramp_share(snap, now_s, self._settings)
        if share >= 1.0 or self._settings.slow_start_rps > 0:  # by rate: `by_rate` decides
            self._credits.pop(target, None)
            return 0.0
        closed_at, credit = self._credits.get(target, (snap.closed_at_s, 0.0))
        if closed_at != snap.closed_at_s:
            credit = 0.0
        admitted, credit = pace(credit, share)
        self._credits[target] = (snap.closed_at_s, credit)
        return 0.0 if admitted else 1.0

    async def by_rate(self, target: str, snap: BreakerSnapshot, now_s: float) -> float:
        """The ramp by rate for an attempt admitted otherwise: 0.0 when it may go (no rate
        applies, or the fleet's counter had room), else the seconds until a call fits.

        Raises:
            StateUnavailable: the store is unreachable (the caller's outage policy decides).
        """
        rate = ramp_rate(snap, now_s, self._settings)
        if rate is None:
            return 0.0
        return await self._store.take_ramp_slot(target, rate)
