"""`build_plan(keys=...)`: an offer no attempt could carry a credential to is left out of the plan
before preferences and the cap (SPEC §6 "BYOK"); without `keys`, every offer stays."""

from __future__ import annotations

import random

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnout.core.ordering import OrderSettings
from turnout.core.plan import KeyFacts, NoMatchingOffer, Plan, Role, RoutingSettings, build_plan
from turnout.core.policy import PlanPolicy, Policy
from turnout.core.preferences import Preferences
from turnout.core.scopes import KeyMode
from turnout.core.types import Target


def t(provider: str, model: str) -> Target:
    return Target(provider=provider, model=f"{model}@{provider}", catalog_model=model)


CATALOG = {
    "duo": (t("north", "duo"), t("west", "duo")),  # configured order: north first
    "solo": (t("east", "solo"),),
    "spare": (t("north", "spare"), t("east", "spare")),
}
PROVIDERS = frozenset({"north", "west", "east"})
MODES: tuple[KeyMode, ...] = ("own_only", "own_then_shared", "shared_only")
UNCAPPED = msgspec.structs.replace(Policy(), plan=PlanPolicy(max_offers=20))


def plan(
    model: str,
    key_mode: KeyMode,
    keys: KeyFacts | None,
    prefs: Preferences = Preferences(),
    fallbacks: tuple[str, ...] = (),
    seed: int = 0,
) -> Plan:
    return build_plan(
        model,
        catalog=CATALOG,
        providers=PROVIDERS,
        settings=RoutingSettings(key_mode=key_mode, fallbacks={"*": fallbacks}),
        policy=UNCAPPED,
        health={},
        rng=random.Random(seed),
        orders={m: "priority" for m in CATALOG},
        order_settings=OrderSettings(explore=0.0),
        preferences=prefs,
        keys=keys,
    )


def keys_of(p: Plan) -> list[str]:
    return [e.target.key for e in p.entries]


WEST_OWN = KeyFacts(own_providers=frozenset({"west"}), shared_providers=PROVIDERS)


def test_own_only_keeps_the_offers_of_the_orgs_providers_and_makes_the_first_one_primary() -> None:
    p = plan("duo", "own_only", WEST_OWN)
    assert keys_of(p) == ["west/duo@west"]
    assert p.entries[0].role is Role.PRIMARY  # nothing was left before it: not a fallback


def test_own_only_with_no_key_for_the_model_keeps_the_platform_keyed_offers() -> None:
    assert keys_of(plan("solo", "own_only", WEST_OWN)) == ["east/solo@east"]


def test_without_allow_fallbacks_the_first_usable_offer_is_kept() -> None:
    p = plan("duo", "own_only", WEST_OWN, Preferences(allow_fallbacks=False))
    assert keys_of(p) == ["west/duo@west"]


def test_preferences_that_leave_only_unusable_offers_match_nothing() -> None:
    with pytest.raises(NoMatchingOffer):
        plan("duo", "own_only", WEST_OWN, Preferences(only=("north",)))
    assert keys_of(plan("duo", "own_only", None, Preferences(only=("north",)))) == ["north/duo@north"]  # control


def test_a_provider_without_a_platform_key_is_left_out_for_an_org_without_its_own() -> None:
    keys = KeyFacts(own_providers=frozenset(), shared_providers=frozenset({"west", "east"}))
    for mode in MODES:
        assert keys_of(plan("duo", mode, keys)) == ["west/duo@west"]


def test_fallback_models_are_filtered_by_their_own_offers() -> None:
    # own_only: the org has a key for north, a provider of `spare` too: only north's offer of spare stays
    keys = KeyFacts(own_providers=frozenset({"north"}), shared_providers=PROVIDERS)
    assert keys_of(plan("solo", "own_only", keys, fallbacks=("spare",))) == ["east/solo@east", "north/spare@north"]


def test_without_keys_every_offer_stays() -> None:
    assert keys_of(plan("duo", "own_only", None)) == ["north/duo@north", "west/duo@west"]


@given(
    model=st.sampled_from(sorted(CATALOG)),
    mode=st.sampled_from(MODES),
    own=st.frozensets(st.sampled_from(sorted(PROVIDERS))),
    shared=st.frozensets(st.sampled_from(sorted(PROVIDERS))),
    fallbacks=st.lists(st.sampled_from(sorted(CATALOG)), max_size=3).map(tuple),
    seed=st.integers(0, 2**16),
)
def test_property_a_plan_holds_exactly_the_usable_offers_of_the_unfiltered_one(
    model: str, mode: KeyMode, own: frozenset[str], shared: frozenset[str], fallbacks: tuple[str, ...], seed: int
) -> None:
    keys = KeyFacts(own_providers=own, shared_providers=shared)
    everything = plan(model, mode, None, fallbacks=fallbacks, seed=seed)
    usable = [
        e.target.key
        for e in everything.entries
        if keys.usable(e.target, frozenset(o.provider for o in CATALOG[e.target.catalog_model]), mode)
    ]
    try:
        filtered = plan(model, mode, keys, fallbacks=fallbacks, seed=seed)
    except NoMatchingOffer:
        assert not usable
        return
    assert keys_of(filtered) == usable  # the unfiltered plan's order, less what no credential reaches
    first = filtered.entries[0]
    assert (first.role is Role.PRIMARY) == (first.target.catalog_model == model)  # else a model fallback serves
