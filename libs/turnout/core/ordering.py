"""Offer ordering: how one model's offers are ranked for a request (SPEC §5, §10).

Owns: the table of ordering strategies (`ORDERINGS`), the per-target facts
they rank by (`TargetHealth`: health standing and score, the fleet's measured
time to first token and output rate), offer prices and the typical token mix
that makes one effective price of them, the tolerance band that makes
near-equal scores ties, and the exploration share that lets a degraded (or
unmeasured) target be tried again.

Every strategy keeps three rules (SPEC §5 "Ordering", §10):

1. HALF_OPEN targets (PROBE) go first: one request must try them.
2. OPEN or resting targets (DOWN) go last, soonest back first.
3. Between them, CLOSED targets (UP) are grouped by health band
   (`tier`): a degraded target goes after every healthy one, whatever the
   strategy ranks by. `priority` is the one exception: it keeps the
   configured order among UP targets (a primary and its backups; the
   breaker, not the ordering, takes a failing primary out).

Adding a strategy is one function and one line in `ORDERINGS`.
Must not import: anything outside the standard library, msgspec and
`turnout.core`. Randomness is an injected `random.Random`.
"""

from __future__ import annotations

import enum
import math
import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Final, Literal

import msgspec

from turnout.core.types import Target


class Standing(enum.StrEnum):
    """Where a target stands for ordering."""

    UP = "up"  # CLOSED: ranked by the strategy within its health band
    PROBE = "probe"  # HALF_OPEN: someone must try it, so it goes first
    DOWN = "down"  # OPEN or resting after a Retry-After: last


class TargetHealth(msgspec.Struct, frozen=True, kw_only=True):
    """What ordering knows of one target at the moment of the plan.

    Attributes:
        score: health score in (0, 1] (`turnout.core.breaker.score`).
        standing: UP, PROBE or DOWN.
        back_in_s: for DOWN, seconds until it may be attempted again.
        ttft_ms: the fleet's rolling measure of its latency in milliseconds
            (time to first token of streams, whole answer of JSON calls),
            or None when unmeasured.
        tokens_per_s: the fleet's rolling measure of its output rate
            (completion tokens per second of an attempt), or None.
    """

    score: float = 1.0
    standing: Standing = Standing.UP
    back_in_s: float = 0.0
    ttft_ms: float | None = None
    tokens_per_s: float | None = None


HEALTHY: Final = TargetHealth()
"""A target with no recent data: ranks as healthy and unmeasured (SPEC §5)."""


class OfferPrice(msgspec.Struct, frozen=True, kw_only=True):
    """Catalog prices of one offer, USD per million tokens."""

    input_usd_per_mtok: float = 0.0
    output_usd_per_mtok: float = 0.0


class PriceMix(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The typical request's share of input and output tokens (relative
    weights, e.g. 3 input tokens for each output token)."""

    input: float = 3.0
    output: float = 1.0


def effective_price(price: OfferPrice, mix: PriceMix) -> float:
    """One price for ranking: the mix-weighted mean of input and output prices.

    Returns:
        USD per million tokens of the mix:
        `(mix.input · input + mix.output · output) / (mix.input + mix.output)`
        (the plain mean when both weights are 0).
    """
    total = mix.input + mix.output
    if total <= 0:
        return (price.input_usd_per_mtok + price.output_usd_per_mtok) / 2
    return (mix.input * price.input_usd_per_mtok + mix.output * price.output_usd_per_mtok) / total


class OrderSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Knobs and catalog facts of the orderings.

    Attributes:
        tolerance: scores in the same band of this width (counted down from
            1.0) are ties (`tier`).
        explore: probability that a request puts one other CLOSED target
            first: a degraded one under `health`, another healthy one under
            `latency` and `throughput` (so its measure stays current).
        prices: target key -> catalog prices; a target absent here (a
            tenant's custom endpoint) ranks neutral under `price` and
            `balanced`.
        price_mix: how input and output prices are weighed into one.
    """

    tolerance: float = 0.05
    explore: float = 0.05
    prices: Mapping[str, OfferPrice] = msgspec.field(default_factory=dict)
    price_mix: PriceMix = PriceMix()

    def price_of(self, target: Target) -> float | None:
        """Effective USD per Mtok of `target` (`effective_price`), or None when unpriced."""
        price = self.prices.get(target.key)
        return None if price is None else effective_price(price, self.price_mix)


OrderName = Literal["health", "priority", "price", "latency", "throughput", "balanced"]
ORDER_NAMES: Final[tuple[str, ...]] = ("health", "priority", "price", "latency", "throughput", "balanced")
SortName = Literal["price", "latency", "throughput"]
"""The strategies a request may ask for in `provider.sort` (§10 preferences)."""

Ordering = Callable[[Sequence[Target], Mapping[str, TargetHealth], OrderSettings, random.Random], tuple[Target, ...]]
"""(offers in configured order, target key -> health, settings, rng) -> offers, first to try first."""

PRICE_FLOOR_USD_PER_MTOK: Final = 0.01
"""`balanced` weighs an offer by 1 / max(price, this)²: a free offer is very
likely first, not certainly (and never a division by zero)."""


def tier(score: float, tolerance: float) -> int:
    """The band of `score`: 0 for scores within `tolerance` of 1.0, 1 for the
    next band down, and so on (a tolerance <= 0 gives every distinct score
    its own order by treating the band as 1e-9)."""
    width = tolerance if tolerance > 0 else 1e-9
    return max(0, math.ceil((1.0 - score) / width - 1e-9) - 1)


Facts = list[tuple[Target, TargetHealth]]


def _split(offers: Sequence[Target], health: Mapping[str, TargetHealth]) -> tuple[Facts, Facts, list[Target]]:
    """(PROBE facts, UP facts, DOWN targets soonest back first), each in configured order."""
    facts = [(t, health.get(t.key, HEALTHY)) for t in offers]
    probes = [(t, h) for t, h in facts if h.standing is Standing.PROBE]
    up = [(t, h) for t, h in facts if h.standing is Standing.UP]
    down = sorted(
        ((h.back_in_s, i, t) for i, (t, h) in enumerate(facts) if h.standing is Standing.DOWN),
        key=lambda item: (item[0], item[1]),
    )
    return probes, up, [t for _, _, t in down]


def _shuffled(facts: Facts, rng: random.Random) -> list[Target]:
    targets = [t for t, _ in facts]
    rng.shuffle(targets)
    return targets


def _explore(ranked: list[Target], candidates: Sequence[Target], settings: OrderSettings, rng: random.Random) -> None:
    """With probability `settings.explore`, move one of `candidates` to the front of `ranked` (in place)."""
    if candidates and settings.explore > 0 and rng.random() < settings.explore:
        chosen = candidates[rng.randrange(len(candidates))]
        ranked.remove(chosen)
        ranked.insert(0, chosen)


def _by_value(
    offers: Sequence[Target],
    health: Mapping[str, TargetHealth],
    settings: OrderSettings,
    rng: random.Random,
    value: Callable[[Target, TargetHealth], float | None],
    *,
    explore: bool,
) -> tuple[Target, ...]:
    """PROBE first; UP by (health band, `value` ascending, random tie-break); DOWN last.

    A target whose `value` is None ranks neutral: as the median of its UP
    peers' values (all ties when none is known). With `explore`, a random
    other target of the best band is put first with probability
    `settings.explore`.
    """
    probes, up, down = _split(offers, health)
    first = _shuffled(probes, rng)
    values = [value(t, h) for t, h in up]
    known = [v for v in values if v is not None]
    neutral = statistics.median(known) if known else 0.0
    keyed = sorted(
        (
            (tier(h.score, settings.tolerance), neutral if v is None else v, rng.random(), t)
            for (t, h), v in zip(up, values)
        ),
        key=lambda item: (item[0], item[1], item[2]),
    )
    ranked = [t for *_, t in keyed]
    if explore and len(keyed) > 1:
        _explore(ranked, [t for band, _, _, t in keyed[1:] if band == keyed[0][0]], settings, rng)
    return (*first, *ranked, *down)


def by_health(
    offers: Sequence[Target], health: Mapping[str, TargetHealth], settings: OrderSettings, rng: random.Random
) -> tuple[Target, ...]:
    """The `health` ordering (SPEC §5 "Ordering"), the default.

    Returns:
        HALF_OPEN targets first (one of the requests holding them becomes the
        probe), then CLOSED targets by score band, ties in random order, then
        OPEN or resting targets, soonest back first. With probability
        `settings.explore`, one CLOSED target of a worse band than the best
        is moved to the front of the CLOSED ones. A target absent from
        `health` ranks as healthy.
    """
    probes, up, down = _split(offers, health)
    first = _shuffled(probes, rng)
    keyed = sorted(
        ((tier(h.score, settings.tolerance), rng.random(), t) for t, h in up), key=lambda item: (item[0], item[1])
    )
    ranked = [t for _, _, t in keyed]
    if len(keyed) > 1 and keyed[-1][0] > keyed[0][0]:
        _explore(ranked, [t for band, _, t in keyed if band > keyed[0][0]], settings, rng)
    return (*first, *ranked, *down)


def by_priority(
    offers: Sequence[Target], health: Mapping[str, TargetHealth], settings: OrderSettings, rng: random.Random
) -> tuple[Target, ...]:
    """The `priority` ordering: the configured order (a primary and its
    backups), whatever the scores; HALF_OPEN targets still go first and OPEN
    or resting ones last, in configured order within each."""
    probes, up, down = _split(offers, health)
    return (*(t for t, _ in probes), *(t for t, _ in up), *down)


def by_price(
    offers: Sequence[Target], health: Mapping[str, TargetHealth], settings: OrderSettings, rng: random.Random
) -> tuple[Target, ...]:
    """The `price` ordering (SPEC §10): cheapest effective price first
    (`effective_price` over `settings.price_mix`) within each health band;
    equal prices are ties in random order; an unpriced target ranks neutral."""
    return _by_value(offers, health, settings, rng, lambda t, h: settings.price_of(t), explore=False)


def by_latency(
    offers: Sequence[Target], health: Mapping[str, TargetHealth], settings: OrderSettings, rng: random.Random
) -> tuple[Target, ...]:
    """The `latency` ordering (SPEC §10): lowest measured time to first token
    first within each health band; an unmeasured target ranks neutral, and
    `settings.explore` of requests try another healthy target first so its
    measure stays current."""
    return _by_value(offers, health, settings, rng, lambda t, h: h.ttft_ms, explore=True)


def by_throughput(
    offers: Sequence[Target], health: Mapping[str, TargetHealth], settings: OrderSettings, rng: random.Random
) -> tuple[Target, ...]:
    """The `throughput` ordering (SPEC §10): highest measured output tokens
    per second first within each health band; unmeasured ranks neutral;
    exploration as for `latency`."""
    return _by_value(
        offers,
        health,
        settings,
        rng,
        lambda t, h: None if h.tokens_per_s is None else -h.tokens_per_s,
        explore=True,
    )


def by_balanced(
    offers: Sequence[Target], health: Mapping[str, TargetHealth], settings: OrderSettings, rng: random.Random
) -> tuple[Target, ...]:
    """The `balanced` ordering (SPEC §10): healthy first, then price-weighted random.

    Within each health band the order is a weighted random permutation
    (successive draws without replacement) with weight
    `1 / max(price, PRICE_FLOOR_USD_PER_MTOK)²`: an offer at half the price
    is drawn first four times as often, so cheap offers take most of the load
    and the others still get some. An unpriced target weighs as the median of
    its priced peers. PROBE first, DOWN last, as in every strategy.
    """
    probes, up, down = _split(offers, health)
    first = _shuffled(probes, rng)
    prices = [settings.price_of(t) for t, _ in up]
    known = [p for p in prices if p is not None]
    neutral = statistics.median(known) if known else 1.0
    bands: dict[int, list[tuple[Target, float]]] = {}
    for (t, h), p in zip(up, prices):
        weight = 1.0 / max(neutral if p is None else p, PRICE_FLOOR_USD_PER_MTOK) ** 2
        bands.setdefault(tier(h.score, settings.tolerance), []).append((t, weight))
    ranked: list[Target] = []
    for band in sorted(bands):
        pool = bands[band]
        while pool:
            draw = rng.random() * sum(w for _, w in pool)
            i = 0
            while i < len(pool) - 1 and draw >= pool[i][1]:
                draw -= pool[i][1]
                i += 1
            ranked.append(pool.pop(i)[0])
    return (*first, *ranked, *down)


ORDERINGS: Final[Mapping[str, Ordering]] = {
    "health": by_health,
    "priority": by_priority,
    "price": by_price,
    "latency": by_latency,
    "throughput": by_throughput,
    "balanced": by_balanced,
}
"""Ordering strategy name (a model's `order:`, a request's `provider.sort`) -> the function."""
