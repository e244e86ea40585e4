"""Slow start by rate: the calls per second a recovered target may get fleet-wide (SPEC §5 slow start).

Owns: the ramp's rate at a time after a close (`ramp_rate`, from the breaker's
`ramp_share` and `BreakerSettings.slow_start_rps`) and the cell-rate counter that
spaces calls by it (`rate_slot`), which the stores keep shared
(`turnout.state.breaker_store`, `take_ramp_slot`).
Must not import: anything outside the standard library, msgspec and `turnout.core`.
"""

from __future__ import annotations

from turnout.core.breaker import BreakerSettings, BreakerSnapshot, ramp_share


def ramp_rate(snapshot: BreakerSnapshot, now_s: float, settings: BreakerSettings) -> float | None:
    """Calls per second the whole fleet may send a target in slow start at `now_s`
    (SPEC §5 slow start, by rate): `ramp_share · slow_start_rps`; None when no rate
    applies (the ramp is over or never began, or `slow_start_rps` is 0)."""
    share = ramp_share(snapshot, now_s, settings)
    if share >= 1.0 or settings.slow_start_rps <= 0:
        return None
    return share * settings.slow_start_rps


def rate_slot(tat_s: float, now_s: float, rate: float) -> tuple[bool, float, float]:
    """Whether one call fits a rate of `rate` calls per second, spaced evenly (a generic
    cell rate: each admitted call moves the theoretical arrival time `tat_s` on by
    `1 / rate`; a call before it is refused). Over any span of `d` seconds at most
    `d · rate + 1` calls are admitted, whatever the offered load.

    Args:
        tat_s: the stored theoretical arrival time (seconds; 0.0 for none).
        now_s: the store's clock.
        rate: calls per second, > 0.

    Returns:
        (admitted, the new `tat_s` to store, seconds until the next call fits
        when refused, else 0.0). The Redis store computes the same in Lua
        (`turnout.state.breaker_store`).
    """
    tat = max(tat_s, now_s)
    if tat > now_s:
        return False, tat_s, tat - now_s
    return True, tat + 1.0 / max(rate, 1e-9), 0.0
