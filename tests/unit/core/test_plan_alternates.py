"""Comparable alternates and the `fallback.only` constraint in the plan (issue #45 item 7; seed 002:
a comparable alternate model may serve, and a model list may constrain the candidates): table tests, then invariants over generated catalogs."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnout.core.alternates import comparable_alternates, constrained
from turnout.core.considered import Why
from turnout.core.model_types import confined
from turnout.core.ordering import OrderSettings
from turnout.core.plan import KeyFacts, NoMatchingOffer, Plan, Role, RoutingSettings, UnknownModel, build_plan
from turnout.core.policy import FallbackPolicy, PinnedPolicy, PlanPolicy, Policy
from turnout.core.preferences import Preferences
from turnout.core.scopes import KeyMode
from turnout.core.types import Target


def t(provider: str, model: str) -> Target:
    return Target(provider=provider, model=f"{model}@{provider}", catalog_model=model)


CATALOG: dict[str, tuple[Target, ...]] = {
    "big-a": (t("pa", "big-a"), t("pb", "big-a")),
    "mini-a": (t("pa", "mini-a"),),
    "big-b": (t("pc", "big-b"),),
    "plain": (t("pe", "plain"),),
    "big-c": (t("pd", "big-c"), t("pa", "big-c")),
    "mini-b": (t("pc", "mini-b"),),
}
CLASSES = {"big-a": "frontier", "big-b": "frontier", "big-c": "frontier", "mini-a": "small", "mini-b": "small"}
PROVIDERS = frozenset({"pa", "pb", "pc", "pd", "pe"})


def policy(*, comparable: bool = True, only: Sequence[str] = (), max_offers: int = 20, **fallback: object) -> Policy:
    return Policy(
        fallback=FallbackPolicy(comparable=comparable, only=tuple(only), **fallback),  # type: ignore[arg-type]
        plan=PlanPolicy(max_offers=max_offers),
    )


def plan(
    model: str,
    pol: Policy | None = None,
    *,
    fallbacks: Sequence[str] = (),
    reroutes: Sequence[str] = (),
    strategy: str | None = None,
    catalog: Mapping[str, Sequence[Target]] = CATALOG,
    classes: Mapping[str, str] = CLASSES,
    preferences: Preferences = Preferences(),
    keys: KeyFacts | None = None,
    key_mode: KeyMode = "own_then_shared",
    custom: Mapping[str, Target] | None = None,
) -> Plan:
    return build_plan(
        model,
        catalog=catalog,
        providers=PROVIDERS,
        settings=RoutingSettings(
            reroutes=tuple(reroutes),
            fallbacks={"*": tuple(fallbacks)},
            strategy_rule=strategy,
            key_mode=key_mode,
            custom_targets=dict(custom or {}),
        ),
        policy=pol or policy(),
        health={},
        rng=random.Random(0),
        orders={m: "priority" for m in catalog},
        order_settings=OrderSettings(explore=0.0),
        preferences=preferences,
        keys=keys,
        classes=classes,
    )


def models_of(p: Plan) -> list[tuple[str, Role]]:
    """(catalog model, role of its first entry) per model of the main sequence, in order."""
    seen: dict[str, Role] = {}
    for e in p.entries:
        seen.setdefault(e.target.catalog_model, e.role)
    return list(seen.items())


A, M, P, C = Role.PRIMARY, Role.MODEL_FALLBACK, Role.PROVIDER_FALLBACK, Role.COMPARABLE_ALTERNATE


# --------------------------------------------------------------------- the rule


def test_off_by_default_no_alternate_is_planned() -> None:
    assert FallbackPolicy().comparable is False
    assert models_of(plan("big-a", policy(comparable=False))) == [("big-a", A)]


def test_the_other_models_of_the_class_follow_in_catalog_order() -> None:
    p = plan("big-a")
    assert models_of(p) == [("big-a", A), ("big-b", C), ("big-c", C)]
    assert [e.target.key for e in p.entries] == [
        "pa/big-a@pa",
        "pb/big-a@pb",
        "pc/big-b@pc",
        "pd/big-c@pd",
        "pa/big-c@pa",
    ]
    assert [e.role for e in p.entries] == [A, P, C, C, C]
    assert [e.is_comparable for e in p.entries] == [False, False, True, True, True]
    assert all(e.is_fallback for e in p.entries[1:])


def test_catalog_order_decides_and_a_reordered_catalog_reorders_them() -> None:
    reordered = {m: CATALOG[m] for m in ("big-c", "plain", "big-a", "big-b", "mini-a", "mini-b")}
    assert models_of(plan("big-a", catalog=reordered)) == [("big-a", A), ("big-c", C), ("big-b", C)]


def test_configured_fallbacks_come_first_and_are_not_repeated_as_alternates() -> None:
    p = plan("big-a", fallbacks=["mini-a", "big-c"])
    assert models_of(p) == [("big-a", A), ("mini-a", M), ("big-c", M), ("big-b", C)]


def test_gateway_fallback_models_still_add_models_as_before() -> None:
    """`fallback.models` keeps its meaning (it adds): an existing file plans as it did."""
    p = plan("big-a", policy(comparable=False, models=("plain",)), fallbacks=["mini-a"])
    assert models_of(p) == [("big-a", A), ("mini-a", M), ("plain", M)]


def test_a_model_without_a_class_gets_no_alternate() -> None:
    assert models_of(plan("plain")) == [("plain", A)]


def test_another_class_never_serves() -> None:
    assert models_of(plan("mini-a")) == [("mini-a", A), ("mini-b", C)]


# --------------------------------------------------------------------- the constraint


def test_only_keeps_the_alternates_it_lists() -> None:
    assert models_of(plan("big-a", policy(only=["big-c"]))) == [("big-a", A), ("big-c", C)]


def test_only_constrains_the_configured_fallbacks_too() -> None:
    p = plan("big-a", policy(comparable=False, only=["plain"], models=("mini-b",)), fallbacks=["mini-a", "plain"])
    assert models_of(p) == [("big-a", A), ("plain", M)]


def test_only_never_removes_the_requested_model_or_its_reroutes() -> None:
    p = plan("big-a", policy(only=["big-c"]), reroutes=["mini-a"])
    assert models_of(p) == [("mini-a", A), ("big-c", C)]  # the requested model is never contacted
    assert plan("plain", policy(only=["big-b"])).entries[0].target.catalog_model == "plain"


def test_an_empty_only_is_no_constraint() -> None:
    assert models_of(plan("big-a", policy(only=[]))) == [("big-a", A), ("big-b", C), ("big-c", C)]


# --------------------------------------------------------------------- where there are none


@pytest.mark.parametrize("allow_other", [False, True], ids=["confined", "allow-other-providers"])
def test_a_pinned_request_never_gets_an_alternate(allow_other: bool) -> None:
    pol = msgspec.structs.replace(policy(), pinned=PinnedPolicy(allow_other_providers=allow_other))
    assert [e.target.key for e in plan("pa/big-a", pol).entries] == ["pa/big-a@pa"]


def test_a_firing_strategy_keeps_its_own_fallback_only() -> None:
    p = plan("big-a", reroutes=["mini-a"], fallbacks=["plain"], strategy="cheap")
    assert models_of(p) == [("mini-a", A), ("plain", M)]


def test_fallback_disabled_or_not_allowed_by_the_request_plans_none() -> None:
    assert models_of(plan("big-a", policy(enabled=False))) == [("big-a", A)]
    assert models_of(plan("big-a", preferences=Preferences(allow_fallbacks=False))) == [("big-a", A)]


def test_a_reroute_looks_up_the_requested_models_class_and_never_contacts_it() -> None:
    p = plan("big-a", reroutes=["big-b"])
    assert models_of(p) == [("big-b", A), ("big-c", C)]


def test_a_custom_endpoint_is_never_an_alternate() -> None:
    custom = {"custom:acme:big": Target(provider="custom:acme", model="big", catalog_model="custom:acme:big")}
    p = plan("big-a", custom=custom)
    assert "custom:acme:big" not in [m for m, _ in models_of(p)]


# --------------------------------------------------------------------- tenants and the cap


def test_the_requests_preferences_narrow_the_alternates() -> None:
    p = plan("big-a", preferences=Preferences(ignore=("pc", "pd")))
    assert [e.target.key for e in p.entries] == ["pa/big-a@pa", "pb/big-a@pb", "pa/big-c@pa"]
    assert {(c.key, c.reason) for c in p.left_out} == {
        ("pc/big-b@pc", Why.PREFERENCES),
        ("pd/big-c@pd", Why.PREFERENCES),
    }


def test_an_own_only_tenant_gets_alternates_as_its_key_mode_allows() -> None:
    """`own_only`: a model it holds a key for keeps only those offers; one it holds none for keeps
    the platform's (SPEC §6), alternates as every other model."""
    keys = KeyFacts(own_providers=frozenset({"pa"}), shared_providers=PROVIDERS)
    p = plan("big-a", keys=keys, key_mode="own_only")
    assert [e.target.key for e in p.entries] == ["pa/big-a@pa", "pc/big-b@pc", "pa/big-c@pa"]
    assert {(c.key, c.reason) for c in p.left_out} == {
        ("pb/big-a@pb", Why.NO_CREDENTIAL),
        ("pd/big-c@pd", Why.NO_CREDENTIAL),
    }


def test_alternates_count_in_max_offers_and_the_cut_ones_are_considered() -> None:
    p = plan("big-a", policy(max_offers=3))
    assert [e.target.key for e in p.entries] == ["pa/big-a@pa", "pb/big-a@pb", "pc/big-b@pc"]
    assert {c.key for c in p.left_out if c.reason == Why.CAPPED} == {"pd/big-c@pd", "pa/big-c@pa"}


def test_the_pure_helpers() -> None:
    order = list(CATALOG)
    assert comparable_alternates("big-a", CLASSES, order, exclude=frozenset({"big-a"})) == ["big-b", "big-c"]
    assert comparable_alternates("plain", CLASSES, order, exclude=frozenset()) == []
    assert comparable_alternates("big-a", CLASSES, order, exclude=frozenset({"big-b"}), only=["big-b"]) == []
    assert constrained(["x", "y", "z"], ["z", "x"]) == ["x", "z"]
    assert constrained(["x", "y"], []) == ["x", "y"]


# --------------------------------------------------------------------- invariants

GEN_PROVIDERS = ("pa", "pb", "pc")
GEN_MODELS = tuple(f"m{i}" for i in range(6))


@st.composite
def catalogs(draw: st.DrawFn) -> tuple[dict[str, tuple[Target, ...]], dict[str, str]]:
    """A catalog of 2-6 models (1-3 offers each, catalog order shuffled) and their classes."""
    names = draw(st.lists(st.sampled_from(GEN_MODELS), min_size=2, max_size=6, unique=True))
    catalog = {
        m: tuple(t(p, m) for p in draw(st.lists(st.sampled_from(GEN_PROVIDERS), min_size=1, max_size=3, unique=True)))
        for m in names
    }
    classes = {m: c for m in names if (c := draw(st.sampled_from([None, "x", "y"]))) is not None}
    return catalog, classes


@settings(max_examples=400, deadline=None)
@given(
    data=catalogs(),
    pick=st.integers(0, 5),
    pin=st.sampled_from([None, *GEN_PROVIDERS]),
    comparable=st.booleans(),
    allow_other=st.booleans(),
    fallbacks=st.lists(st.sampled_from(GEN_MODELS), max_size=3),
    gateway_models=st.lists(st.sampled_from(GEN_MODELS), max_size=2),
    only=st.lists(st.sampled_from(GEN_MODELS), max_size=3),
    ignore=st.lists(st.sampled_from(GEN_PROVIDERS), max_size=2, unique=True),
    own=st.lists(st.sampled_from(GEN_PROVIDERS), max_size=3, unique=True),
    key_mode=st.sampled_from(["own_only", "own_then_shared", "shared_only"]),
    max_offers=st.integers(1, 12),
)
def test_property_alternates_stay_in_the_class_the_constraint_and_the_tenants_reach(
    data: tuple[dict[str, tuple[Target, ...]], dict[str, str]],
    pick: int,
    pin: str | None,
    comparable: bool,
    allow_other: bool,
    fallbacks: list[str],
    gateway_models: list[str],
    only: list[str],
    ignore: list[str],
    own: list[str],
    key_mode: KeyMode,
    max_offers: int,
) -> None:
    catalog, classes = data
    asked = list(catalog)[pick % len(catalog)]
    pol = policy(comparable=comparable, only=only, max_offers=max_offers, models=tuple(gateway_models))
    pol = msgspec.structs.replace(pol, pinned=PinnedPolicy(allow_other_providers=allow_other))
    keys = KeyFacts(own_providers=frozenset(own), shared_providers=frozenset(GEN_PROVIDERS))
    requested = f"{pin}/{asked}" if pin is not None else asked
    try:
        p = plan(
            requested,
            pol,
            fallbacks=fallbacks,
            catalog=catalog,
            classes=classes,
            preferences=Preferences(ignore=tuple(ignore)),
            keys=keys,
            key_mode=key_mode,
        )
    except NoMatchingOffer:
        return
    except UnknownModel:  # a pin on a provider that does not serve the model
        assert pin is not None
        return
    alternates = [e for e in p.entries if e.role is Role.COMPARABLE_ALTERNATE]
    if not comparable or pin is not None:
        assert not alternates  # off by default; a pinned request never gets one
    for e in alternates:  # never outside the requested model's class, never the model itself
        model = e.target.catalog_model
        assert model != asked and asked in classes and classes.get(model) == classes[asked]
        assert model not in fallbacks and model not in gateway_models  # a configured fallback stays one
    if only:  # never outside the constraint
        assert all(
            e.target.catalog_model in only
            for e in p.entries
            if e.role in (Role.MODEL_FALLBACK, Role.COMPARABLE_ALTERNATE)
        )
    roles = [e.role for e in p.entries]
    if alternates:  # configured fallbacks first
        first = roles.index(Role.COMPARABLE_ALTERNATE)
        assert Role.MODEL_FALLBACK not in roles[first:] and Role.PRIMARY not in roles[first:]
    for e in p.entries:  # every entry an offer of its catalog model, within the tenant's reach
        assert e.target in catalog[e.target.catalog_model]
        assert e.target.provider not in ignore
        providers = frozenset(x.provider for x in catalog[e.target.catalog_model])
        assert keys.usable(e.target, providers, key_mode)
    assert len({e.target.key for e in p.entries}) <= max_offers


def test_an_embedding_models_plan_is_confined_to_no_alternate() -> None:
    """`confined` (`turnout.core.model_types`) turns `comparable` off for an embedding request."""
    _, kept = confined(RoutingSettings(), policy(models=("plain",)))
    assert kept.fallback.comparable is False and kept.fallback.models == ()
