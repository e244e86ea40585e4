"""Offer ordering: how one model's offers are ranked for a request (SPEC §5, §10).

Owns: the table of ordering strategies (`ORDERINGS`), the per-target health
facts they rank by (`TargetHealth`), the tolerance band that makes near-equal
scores ties, and the exploration share that lets a degraded target recover.
Adding a strategy is one function and one line in `ORDERINGS`.
Must not import: anything outside the standard library, msgspec and
`turnout.core`. Randomness is an injected `random.Random`.
"""

from __future__ import annotations

import enum
import math
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Final, Literal

import msgspec

from turnout.core.types import Target


class Standing(enum.StrEnum):
    """Where a target stands for ordering."""

    UP = "up"  # CLOSED: ranked by its score
    PROBE = "probe"  # HALF_OPEN: someone must try it, so it goes first
    DOWN = "down"  # OPEN or resting after a Retry-After: last


class TargetHealth(msgspec.Struct, frozen=True, kw_only=True):
    """What ordering knows of one target at the moment of the plan.

    Attributes:
        score: health score in (0, 1] (`turnout.core.breaker.score`).
        standing: UP, PROBE or DOWN.
        back_in_s: for DOWN, seconds until it may be attempted again.
    """

    score: float = 1.0
    standing: Standing = Standing.UP
    back_in_s: float = 0.0


HEALTHY: Final = TargetHealth()
"""A target with no recent data: ranks as healthy (SPEC §5)."""


class OrderSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Knobs of the `health` ordering (from the `breaker:` configuration).

    Attributes:
        tolerance: scores in the same band of this width (counted down from
            1.0) are ties, shuffled so load spreads.
        explore: probability that a request puts one degraded but CLOSED
            target first, so its score can recover.
    """

    tolerance: float = 0.05
    explore: float = 0.05


OrderName = Literal["health", "priority"]
Ordering = Callable[[Sequence[Target], Mapping[str, TargetHealth], OrderSettings, random.Random], tuple[Target, ...]]
"""(offers in configured order, target key -> health, settings, rng) -> offers, first to try first."""


def tier(score: float, tolerance: float) -> int:
    """The band of `score`: 0 for scores within `tolerance` of 1.0, 1 for the
    next band down, and so on (a tolerance <= 0 gives every distinct score
    its own order by treating the band as 1e-9)."""
    width = tolerance if tolerance > 0 else 1e-9
    return max(0, math.ceil((1.0 - score) / width - 1e-9) - 1)


def by_health(
    offers: Sequence[Target], health: Mapping[str, TargetHealth], settings: OrderSettings, rng: random.Random
) -> tuple[Target, ...]:
    """The `health` ordering (SPEC §5 "Ordering").

    Returns:
        HALF_OPEN targets first (one of the requests holding them becomes the
        probe), then CLOSED targets by score band, ties in random order, then
        OPEN or resting targets, soonest back first. With probability
        `settings.explore`, one CLOSED target of a worse band than the best
        is moved to the front of the CLOSED ones. A target absent from
        `health` ranks as healthy.
    """
    facts = [(t, health.get(t.key, HEALTHY)) for t in offers]
    probes = [t for t, h in facts if h.standing is Standing.PROBE]
    rng.shuffle(probes)
    up = sorted(
        ((tier(h.score, settings.tolerance), rng.random(), t) for t, h in facts if h.standing is Standing.UP),
        key=lambda item: (item[0], item[1]),
    )
    down = sorted(((h.back_in_s, i, t) for i, (t, h) in enumerate(facts) if h.standing is Standing.DOWN),
                  key=lambda item: (item[0], item[1]))
    ranked = [t for _, _, t in up]
    if len(up) > 1 and up[-1][0] > up[0][0] and settings.explore > 0 and rng.random() < settings.explore:
        degraded = [t for band, _, t in up if band > up[0][0]]
        chosen = degraded[rng.randrange(len(degraded))]
        ranked.remove(chosen)
        ranked.insert(0, chosen)
    return (*probes, *ranked, *(t for _, _, t in down))


def by_priority(
    offers: Sequence[Target], health: Mapping[str, TargetHealth], settings: OrderSettings, rng: random.Random
) -> tuple[Target, ...]:
    """The `priority` ordering: always the configured order (a primary and
    its backups); admission still skips OPEN and resting targets."""
    return tuple(offers)


ORDERINGS: Final[Mapping[str, Ordering]] = {
    "health": by_health,
    "priority": by_priority,
}
"""Ordering strategy name (a model's `order:`) -> the function."""
