"""Slow start after a close: this process's share of a target's offered attempts (SPEC §5).

Owns: the pacing credit per target and close, so the share of attempts a
process lets through rises with `turnout.core.breaker.ramp_share` and is spread
evenly (`turnout.core.breaker.pace`), not drawn at random.
Must not import: services, FastAPI, httpx, Redis.
"""

from __future__ import annotations

from turnout.core.breaker import BreakerSettings, BreakerSnapshot, pace, ramp_share


class SlowStart:
    """Pacing credits of the targets in slow start.

    Args:
        settings: thresholds (the ramp's length and first share).
    """

    def __init__(self, settings: BreakerSettings) -> None:
        self._settings = settings
        self._credits: dict[str, tuple[float, float]] = {}  # target -> (closed_at_s, slow-start credit)

    def draw(self, target: str, snap: BreakerSnapshot, now_s: float) -> float:
        """The slow-start draw of this process for `target` at store-clock `now_s` (epoch s):
        0.0 (admit) or 1.0 (leave out), for `turnout.core.breaker.admit`."""
        share = ramp_share(snap, now_s, self._settings)
        if share >= 1.0:
            self._credits.pop(target, None)
            return 0.0
        closed_at, credit = self._credits.get(target, (snap.closed_at_s, 0.0))
        if closed_at != snap.closed_at_s:
            credit = 0.0
        admitted, credit = pace(credit, share)
        self._credits[target] = (snap.closed_at_s, credit)
        return 0.0 if admitted else 1.0
