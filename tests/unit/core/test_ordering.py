"""Table tests and properties for turnout.core.ordering (SPEC §5 "Ordering")."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings as hsettings
from hypothesis import strategies as st

from turnout.core.breaker import BreakerSettings, BreakerSnapshot, Counted, record, score
from turnout.core.ordering import (
    ORDERINGS,
    OrderSettings,
    Standing,
    TargetHealth,
    by_health,
    by_priority,
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
    health = {G: TargetHealth(standing=Standing.DOWN, back_in_s=9.0),
              T: TargetHealth(standing=Standing.DOWN, back_in_s=1.0)}
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
    assert set(ORDERINGS) == {"health", "priority"}


healths = st.builds(TargetHealth, score=st.floats(0.01, 1.0), standing=st.sampled_from(Standing),
                    back_in_s=st.floats(0.0, 100.0))


@hsettings(max_examples=300, deadline=None)
@given(health=st.dictionaries(st.sampled_from([G, T, F]), healths), seed=st.integers(0, 2**32),
       explore=st.floats(0.0, 1.0))
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
    gap=st.floats(0.0, 20.0), seed=st.integers(0, 2**32),
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
