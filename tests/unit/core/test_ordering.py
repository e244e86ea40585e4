"""Table tests and properties for turnout.core.ordering (SPEC §5 "Ordering")."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from turnout.core.breaker import BreakerSettings, BreakerSnapshot, Counted, record, score
from turnout.core.ordering import (
    ORDER_NAMES,
    ORDERINGS,
    OfferPrice,
    OrderSettings,
    PriceMix,
    Standing,
    TargetHealth,
    by_balanced,
    by_health,
    by_latency,
    by_price,
    by_priority,
    by_throughput,
    effective_price,
    tier,
)
from turnout.core.types import Target

NO_EXPLORE = OrderSettings(explore=0.0)
OFFERS = tuple(Target(provider=p, model="llama", catalog_model="llama") for p in ("groq", "together", "fireworks"))


def rank(rates: dict[str, float], seed: int, settings: OrderSettings = NO_EXPLORE) -> tuple[str, ...]:
    health = {k: TargetHealth(score=v) for k, v in rates.items()}
    return tuple(t.key for t in by_health(OFFERS, health, settings, random.Random(seed)))


G, T, F = (o.key for o in OFFERS)


@pytest.mark.parametrize(
    ("rates", "expected"),
    [
        ({G: 0.9, T: 0.5, F: 0.1}, [G, T, F]),
        ({G: 0.1, T: 0.5, F: 0.9}, [F, T, G]),
        ({G: 0.0, T: 0.99}, [F, T, G]),
        ({G: 0.5}, None),
    ],
    ids=["descending", "ascending-reversed", "unknown-ranks-as-healthy", "one-known-worse"],
)
def test_by_health_by_score(rates: dict[str, float], expected: list[str] | None) -> None:
    ranked = list(rank(rates, 3))
    if expected is None:  # the known-worse offer is last; the other two tie
        assert ranked[-1] == G and set(ranked[:2]) == {T, F}
    else:
        assert ranked == expected


def test_by_health_shuffles_ties_with_the_rng() -> None:
    orders = {rank({}, seed) for seed in range(60)}
    assert len(orders) == 6  # every permutation of three healthy offers appears


def test_by_health_ties_only_shuffle_among_equals() -> None:
    rates = {G: 0.8, T: 0.8, F: 0.3}
    orders = {rank(rates, seed) for seed in range(40)}
    assert orders == {(G, T, F), (T, G, F)}


def test_by_health_is_deterministic_for_a_seed() -> None:
    assert rank({}, 11) == rank({}, 11)


def test_by_health_of_nothing_is_nothing() -> None:
    assert by_health((), {}, NO_EXPLORE, random.Random(0)) == ()


@pytest.mark.parametrize(
    ("score", "band"),
    [(1.0, 0), (0.97, 0), (0.95, 0), (0.9499, 1), (0.9, 1), (0.5, 9), (0.0, 19)],
)
def test_tier_counts_bands_down_from_one(score: float, band: int) -> None:
    assert tier(score, 0.05) == band


def test_scores_within_the_tolerance_band_are_ties() -> None:
    orders = {rank({G: 1.0, T: 0.97, F: 0.2}, seed) for seed in range(40)}
    assert orders == {(G, T, F), (T, G, F)}


def test_probe_targets_go_first_and_down_targets_last() -> None:
    health = {
        G: TargetHealth(standing=Standing.DOWN, back_in_s=3.0),
        T: TargetHealth(score=0.2),
        F: TargetHealth(standing=Standing.PROBE, score=0.1),
    }
    for seed in range(20):
        assert [t.key for t in by_health(OFFERS, health, NO_EXPLORE, random.Random(seed))] == [F, T, G]


def test_down_targets_are_ordered_by_their_return() -> None:
    health = {
        G: TargetHealth(standing=Standing.DOWN, back_in_s=9.0),
        T: TargetHealth(standing=Standing.DOWN, back_in_s=1.0),
    }
    assert [t.key for t in by_health(OFFERS, health, NO_EXPLORE, random.Random(0))] == [F, T, G]


def test_exploration_sends_about_its_share_to_a_degraded_target() -> None:
    settings = OrderSettings(explore=0.05)
    rng = random.Random(1)
    health = {G: TargetHealth(score=0.5)}
    firsts = Counter(by_health(OFFERS, health, settings, rng)[0].key for _ in range(20_000))
    assert 0.04 < firsts[G] / 20_000 < 0.06
    assert firsts[T] + firsts[F] == 20_000 - firsts[G]


def test_exploration_needs_a_healthier_peer() -> None:
    settings = OrderSettings(explore=1.0)
    health = {G: TargetHealth(score=0.5), T: TargetHealth(score=0.5), F: TargetHealth(score=0.5)}
    assert {by_health(OFFERS, health, settings, random.Random(s))[0].key for s in range(30)} == {G, T, F}


def test_priority_keeps_the_configured_order() -> None:
    health = {OFFERS[0].key: TargetHealth(score=0.01)}
    assert by_priority(OFFERS, health, NO_EXPLORE, random.Random(0)) == OFFERS


def test_priority_still_puts_probes_first_and_down_targets_last() -> None:
    health = {G: TargetHealth(standing=Standing.DOWN, back_in_s=2.0), F: TargetHealth(standing=Standing.PROBE)}
    assert [t.key for t in by_priority(OFFERS, health, NO_EXPLORE, random.Random(0))] == [F, T, G]


def test_the_table_names_every_strategy_once() -> None:
    assert tuple(ORDERINGS) == ORDER_NAMES == ("health", "priority", "price", "latency", "throughput", "balanced")


healths = st.builds(
    TargetHealth, score=st.floats(0.01, 1.0), standing=st.sampled_from(Standing), back_in_s=st.floats(0.0, 100.0)
)


@hsettings(max_examples=300, deadline=None)
@given(
    health=st.dictionaries(st.sampled_from([G, T, F]), healths), seed=st.integers(0, 2**32), explore=st.floats(0.0, 1.0)
)
def test_property_ranking_is_a_permutation_with_probes_first_and_down_last(
    health: dict[str, TargetHealth], seed: int, explore: float
) -> None:
    ranked = [t.key for t in by_health(OFFERS, health, OrderSettings(explore=explore), random.Random(seed))]
    assert sorted(ranked) == sorted(t.key for t in OFFERS)
    standing = [health.get(k, TargetHealth()).standing for k in ranked]
    order = {Standing.PROBE: 0, Standing.UP: 1, Standing.DOWN: 2}
    assert [order[s] for s in standing] == sorted(order[s] for s in standing)


@hsettings(max_examples=300, deadline=None)
@given(
    results=st.lists(st.sampled_from([Counted.SUCCESS, Counted.FAILURE]), min_size=1, max_size=40),
    gap=st.floats(0.0, 20.0),
    seed=st.integers(0, 2**32),
)
def test_property_a_target_with_no_failure_is_never_ranked_in_a_worse_band(
    results: list[Counted], gap: float, seed: int
) -> None:
    """SPEC §5: a target with no failure in its window is never ranked below
    one with failures, beyond the tolerance band (where they are ties)."""
    cfg = BreakerSettings()
    failing = BreakerSnapshot()
    clean = BreakerSnapshot()
    for i, counted in enumerate(results):
        failing = record(failing, counted, probe=False, now_s=i * gap, settings=cfg)
        clean = record(clean, Counted.SUCCESS, probe=False, now_s=i * gap, settings=cfg)
    now = len(results) * gap
    health = {G: TargetHealth(score=score(failing, now, cfg)), T: TargetHealth(score=score(clean, now, cfg))}
    ranked = [t.key for t in by_health(OFFERS[:2], health, NO_EXPLORE, random.Random(seed))]
    if ranked.index(T) > ranked.index(G):
        assert tier(health[G].score, NO_EXPLORE.tolerance) == tier(health[T].score, NO_EXPLORE.tolerance) == 0


# ------------------------------------------------------------------ price, latency, throughput, balanced

PRICES = {
    G: OfferPrice(input_usd_per_mtok=30.0, output_usd_per_mtok=60.0),
    T: OfferPrice(input_usd_per_mtok=0.10, output_usd_per_mtok=0.20),
    F: OfferPrice(input_usd_per_mtok=1.0, output_usd_per_mtok=2.0),
}
PRICED = OrderSettings(explore=0.0, prices=PRICES)


@pytest.mark.parametrize(
    ("price", "mix", "expected"),
    [
        (OfferPrice(input_usd_per_mtok=1.0, output_usd_per_mtok=5.0), PriceMix(), 2.0),
        (OfferPrice(input_usd_per_mtok=1.0, output_usd_per_mtok=5.0), PriceMix(input=1, output=1), 3.0),
        (OfferPrice(input_usd_per_mtok=1.0, output_usd_per_mtok=5.0), PriceMix(input=0, output=1), 5.0),
        (OfferPrice(input_usd_per_mtok=1.0, output_usd_per_mtok=5.0), PriceMix(input=0, output=0), 3.0),
    ],
    ids=["default-3-to-1", "even", "output-only", "no-weights-plain-mean"],
)
def test_effective_price_weighs_input_and_output_by_the_mix(price: OfferPrice, mix: PriceMix, expected: float) -> None:
    assert effective_price(price, mix) == pytest.approx(expected)


def test_price_ranks_cheapest_first() -> None:
    for seed in range(20):
        assert [t.key for t in by_price(OFFERS, {}, PRICED, random.Random(seed))] == [T, F, G]


def test_price_puts_a_degraded_cheap_offer_after_the_healthy_ones() -> None:
    health = {T: TargetHealth(score=2 / 3)}  # one failure, no success: a worse band
    assert [t.key for t in by_price(OFFERS, health, PRICED, random.Random(0))] == [F, G, T]


def test_price_ranks_an_unpriced_offer_as_the_median_of_its_peers() -> None:
    settings = OrderSettings(explore=0.0, prices={G: PRICES[G], T: PRICES[T]})  # F unpriced: neutral
    orders = {tuple(t.key for t in by_price(OFFERS, {}, settings, random.Random(s))) for s in range(40)}
    assert orders == {(T, F, G)}  # F ranks as the median of 0.125 and 37.5 USD/Mtok
    alone = OrderSettings(explore=0.0, prices={T: PRICES[T]})  # one priced peer: F ties with it
    assert {by_price(OFFERS[1:], {}, alone, random.Random(s))[0].key for s in range(40)} == {T, F}


def test_latency_ranks_the_measured_fastest_first_and_unmeasured_as_neutral() -> None:
    health = {G: TargetHealth(ttft_ms=900.0), T: TargetHealth(ttft_ms=100.0)}
    orders = {tuple(t.key for t in by_latency(OFFERS, health, NO_EXPLORE, random.Random(s))) for s in range(40)}
    assert all(o[-1] == G for o in orders)  # F (unmeasured) ties with the median (500 ms): between them
    health[F] = TargetHealth(ttft_ms=300.0)
    assert [t.key for t in by_latency(OFFERS, health, NO_EXPLORE, random.Random(0))] == [T, F, G]


def test_throughput_ranks_the_highest_output_rate_first() -> None:
    health = {
        G: TargetHealth(tokens_per_s=300.0),
        T: TargetHealth(tokens_per_s=20.0),
        F: TargetHealth(tokens_per_s=90.0),
    }
    assert [t.key for t in by_throughput(OFFERS, health, NO_EXPLORE, random.Random(0))] == [G, F, T]


def test_latency_explores_another_healthy_target_at_about_its_share() -> None:
    health = {G: TargetHealth(ttft_ms=50.0), T: TargetHealth(ttft_ms=500.0), F: TargetHealth(ttft_ms=900.0)}
    rng = random.Random(4)
    firsts = Counter(by_latency(OFFERS, health, OrderSettings(explore=0.05), rng)[0].key for _ in range(20_000))
    assert 0.04 < (20_000 - firsts[G]) / 20_000 < 0.06


def test_balanced_draws_first_in_proportion_to_inverse_price_squared() -> None:
    settings = OrderSettings(
        explore=0.0,
        prices={
            G: OfferPrice(input_usd_per_mtok=1.0, output_usd_per_mtok=1.0),
            T: OfferPrice(input_usd_per_mtok=2.0, output_usd_per_mtok=2.0),
        },
    )
    rng = random.Random(9)
    firsts = Counter(by_balanced(OFFERS[:2], {}, settings, rng)[0].key for _ in range(20_000))
    assert firsts[G] / 20_000 == pytest.approx(0.8, abs=0.015)  # weights 1 : 1/4


def test_balanced_keeps_healthy_first_whatever_the_price() -> None:
    health = {T: TargetHealth(score=0.3)}  # the cheapest, but degraded
    for seed in range(30):
        assert by_balanced(OFFERS, health, PRICED, random.Random(seed))[-1].key == T


def test_balanced_serves_a_free_offer_first_almost_always_without_dividing_by_zero() -> None:
    settings = OrderSettings(prices={G: OfferPrice(), T: PRICES[T]})
    firsts = Counter(by_balanced(OFFERS[:2], {}, settings, random.Random(s))[0].key for s in range(500))
    assert firsts[G] >= 490


measured = st.builds(
    TargetHealth,
    score=st.floats(0.01, 1.0),
    standing=st.sampled_from(Standing),
    back_in_s=st.floats(0.0, 100.0),
    ttft_ms=st.none() | st.floats(1.0, 10_000.0),
    tokens_per_s=st.none() | st.floats(0.1, 1_000.0),
)
prices = st.builds(OfferPrice, input_usd_per_mtok=st.floats(0.0, 100.0), output_usd_per_mtok=st.floats(0.0, 100.0))


@hsettings(max_examples=400, deadline=None)
@given(
    name=st.sampled_from(ORDER_NAMES),
    health=st.dictionaries(st.sampled_from([G, T, F]), measured),
    priced=st.dictionaries(st.sampled_from([G, T, F]), prices),
    seed=st.integers(0, 2**32),
    explore=st.floats(0.0, 1.0),
)
def test_property_every_strategy_permutes_with_probes_first_down_last_and_healthy_before_degraded(
    name: str, health: dict[str, TargetHealth], priced: dict[str, OfferPrice], seed: int, explore: float
) -> None:
    """SPEC §5/§10: whatever the strategy, PROBE first, DOWN last (soonest back
    first); every strategy but `priority` ranks no UP target of a worse health
    band before one of the best band, except `health`'s exploration pick."""
    settings = OrderSettings(explore=explore, prices=priced)
    ranked = [t.key for t in ORDERINGS[name](OFFERS, health, settings, random.Random(seed))]
    assert sorted(ranked) == sorted(t.key for t in OFFERS)
    facts = [health.get(k, TargetHealth()) for k in ranked]
    order = {Standing.PROBE: 0, Standing.UP: 1, Standing.DOWN: 2}
    assert [order[h.standing] for h in facts] == sorted(order[h.standing] for h in facts)
    down = [h.back_in_s for h in facts if h.standing is Standing.DOWN]
    assert down == sorted(down)
    up_bands = [tier(h.score, settings.tolerance) for h in facts if h.standing is Standing.UP]
    if name in ("price", "latency", "throughput", "balanced"):
        assert up_bands == sorted(up_bands)
    elif name == "health":
        assert up_bands[1:] == sorted(up_bands[1:])  # the first may be the exploration pick


@hsettings(max_examples=300, deadline=None)
@given(priced=st.dictionaries(st.sampled_from([G, T, F]), prices, min_size=3), seed=st.integers(0, 2**32))
def test_property_price_among_healthy_offers_is_sorted_by_effective_price(
    priced: dict[str, OfferPrice], seed: int
) -> None:
    settings = OrderSettings(prices=priced)
    ranked = by_price(OFFERS, {}, settings, random.Random(seed))
    values = [settings.price_of(t) for t in ranked]
    assert values == sorted(values)  # type: ignore[type-var]


@hsettings(max_examples=300, deadline=None)
@given(
    ttft=st.dictionaries(st.sampled_from([G, T, F]), st.floats(1.0, 10_000.0), min_size=3), seed=st.integers(0, 2**32)
)
def test_property_latency_without_exploration_is_sorted_by_measure(ttft: dict[str, float], seed: int) -> None:
    health = {k: TargetHealth(ttft_ms=v) for k, v in ttft.items()}
    ranked = by_latency(OFFERS, health, NO_EXPLORE, random.Random(seed))
    values = [ttft[t.key] for t in ranked]
    assert values == sorted(values)
