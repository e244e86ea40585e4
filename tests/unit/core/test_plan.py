"""Table tests for turnout.core.plan (SPEC §3 step 1, §5 ordering, §6 fallbacks)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import msgspec
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from turnout.core.ordering import OrderSettings, Standing, TargetHealth
from turnout.core.plan import (
    NoMatchingOffer,
    Plan,
    Role,
    RoutingSettings,
    UnknownModel,
    build_plan,
    lookup,
    split_pinned,
)
from turnout.core.policy import FallbackPolicy, PinnedPolicy, PlanPolicy, Policy
from turnout.core.preferences import Preferences
from turnout.core.scopes import as_model_map
from turnout.core.types import Target


def t(provider: str, model: str, catalog_model: str) -> Target:
    return Target(provider=provider, model=model, catalog_model=catalog_model)


CATALOG: dict[str, tuple[Target, ...]] = {
    "gpt-5": (t("openai", "gpt-5", "gpt-5"), t("azure", "gpt-5-prod", "gpt-5")),
    "claude": (t("anthropic", "claude-sonnet-4-5", "claude"), t("bedrock", "anthropic.claude", "claude")),
    "gemini": (t("google", "gemini-2.5-pro", "gemini"),),
    "llama": (
        t("groq", "llama-3.3-70b", "llama"),
        t("together", "llama-3.3-70b", "llama"),
        t("fireworks", "llama-v3p3-70b", "llama"),
    ),
    # A catalog id that contains '/' and starts with a provider name.
    "groq/compound": (t("groq", "compound-beta", "groq/compound"),),
}
NO_EXPLORE = OrderSettings(explore=0.0)
PROVIDERS = frozenset({"openai", "azure", "anthropic", "bedrock", "google", "groq", "together", "fireworks"})


def plan(
    model: str,
    *,
    reroutes: Sequence[str] = (),
    fallbacks: Mapping[str, Sequence[str]] | None = None,
    context_window: Mapping[str, Sequence[str]] | None = None,
    content_policy: Mapping[str, Sequence[str]] | None = None,
    policy: Policy = Policy(),
    success_rate: Mapping[str, float] | None = None,
    seed: int = 0,
    priority_models: frozenset[str] = frozenset(),
    catalog: Mapping[str, Sequence[Target]] = CATALOG,
    max_offers: int = 20,
    health: Mapping[str, TargetHealth] | None = None,
    providers: frozenset[str] = PROVIDERS | {"pa", "pb"},
) -> Plan:
    """A plan over CATALOG; uncapped (20 offers) unless `max_offers` says otherwise."""

    def as_map(m: Mapping[str, Sequence[str]] | None) -> dict[str, tuple[str, ...]]:
        return {k: tuple(v) for k, v in (m or {}).items()}

    return build_plan(
        model,
        catalog=catalog,
        providers=providers,
        settings=RoutingSettings(
            reroutes=tuple(reroutes),
            fallbacks=as_map(fallbacks),
            context_window_fallbacks=as_map(context_window),
            content_policy_fallbacks=as_map(content_policy),
        ),
        policy=msgspec.structs.replace(policy, plan=PlanPolicy(max_offers=max_offers)),
        health=dict(health or {}) | {k: TargetHealth(score=v) for k, v in (success_rate or {}).items()},
        rng=random.Random(seed),
        orders={m: "priority" for m in priority_models},
        order_settings=NO_EXPLORE,
    )


def models_of(p: Plan) -> list[str]:
    """Catalog models of the main entries, each once, in order."""
    return list(dict.fromkeys(e.target.catalog_model for e in p.entries))


def keys(entries: Sequence[object]) -> list[str]:
    return [e.target.key for e in entries]  # type: ignore[attr-defined]


# In priority order every model keeps its configured offer order.
PRIO = frozenset(CATALOG)


# --------------------------------------------------------------------- basic shape


def test_plan_plain_request_expands_the_model_into_its_offers() -> None:
    p = plan("gpt-5", priority_models=PRIO)
    assert keys(p.entries) == ["openai/gpt-5", "azure/gpt-5-prod"]
    assert [e.role for e in p.entries] == [Role.PRIMARY, Role.PROVIDER_FALLBACK]
    assert [e.is_fallback for e in p.entries] == [False, True]
    assert not any(e.is_reroute for e in p.entries)
    assert p.requested_model == "gpt-5"
    assert p.rerouted is False
    assert p.context_window == () and p.content_policy == ()


@pytest.mark.parametrize(
    "model",
    ["gpt-6", "", "GPT-5", "openai", "gpt-5/"],
    ids=["unknown", "empty", "wrong-case", "provider-name", "trailing-slash"],
)
def test_plan_unknown_model_raises_unknown_model(model: str) -> None:
    with pytest.raises(UnknownModel) as info:
        plan(model)
    assert info.value.model == model
    assert f"`{model}`" in str(info.value)


# --------------------------------------------------------------------- reroute


def test_plan_reroute_substitutes_the_requested_model() -> None:
    p = plan("gpt-5", reroutes=["claude", "gemini"], priority_models=PRIO)
    assert p.rerouted is True
    assert p.requested_model == "gpt-5"
    assert keys(p.entries) == ["anthropic/claude-sonnet-4-5", "bedrock/anthropic.claude", "google/gemini-2.5-pro"]
    assert [e.role for e in p.entries] == [Role.PRIMARY, Role.PROVIDER_FALLBACK, Role.MODEL_FALLBACK]
    assert all(e.is_reroute for e in p.entries)


def test_plan_reroute_never_contains_the_requested_model_even_through_fallbacks() -> None:
    p = plan(
        "gpt-5",
        reroutes=["claude"],
        fallbacks={"gpt-5": ["gpt-5", "gemini"], "*": ["gpt-5"]},
        policy=Policy(fallback=FallbackPolicy(models=("gpt-5", "llama"))),
        context_window={"gpt-5": ["gpt-5", "gemini"]},
        content_policy={"*": ["gpt-5"]},
    )
    every = p.entries + p.context_window + p.content_policy
    assert "gpt-5" not in {e.target.catalog_model for e in every}
    assert models_of(p) == ["claude", "gemini", "llama"]


def test_plan_reroute_fallbacks_are_looked_up_by_the_requested_model_and_not_marked_reroute() -> None:
    p = plan("gpt-5", reroutes=["claude"], fallbacks={"gpt-5": ["gemini"], "claude": ["llama"]})
    assert models_of(p) == ["claude", "gemini"]
    assert [e.is_reroute for e in p.entries] == [True, True, False]


def test_plan_reroute_list_is_deduplicated() -> None:
    p = plan("gpt-5", reroutes=["claude", "gemini", "claude"], fallbacks={"*": ["gemini"]})
    assert models_of(p) == ["claude", "gemini"]


# --------------------------------------------------------------------- model fallbacks


@pytest.mark.parametrize(
    ("model", "fallbacks", "expected"),
    [
        ("gpt-5", {"gpt-5": ["claude"], "*": ["gemini"]}, ["gpt-5", "claude"]),
        ("claude", {"gpt-5": ["claude"], "*": ["gemini"]}, ["claude", "gemini"]),
        ("gemini", {"gpt-5": ["claude"]}, ["gemini"]),
        ("gpt-5", {"gpt-5": []}, ["gpt-5"]),
        ("gpt-5", {"gpt-5": [], "*": ["gemini"]}, ["gpt-5"]),
        ("gpt-5", {"*": ["claude", "gemini"]}, ["gpt-5", "claude", "gemini"]),
    ],
    ids=[
        "own-entry-wins-over-star",
        "star-for-other-models",
        "no-entry-no-star",
        "empty-own-entry",
        "empty-own-entry-shadows-star",
        "star-order-kept",
    ],
)
def test_plan_fallback_map_per_model_and_star(model: str, fallbacks: dict[str, list[str]], expected: list[str]) -> None:
    assert models_of(plan(model, fallbacks=fallbacks)) == expected


def test_plan_plain_fallback_list_means_star() -> None:
    model_map = as_model_map(["claude", "gemini"])
    assert model_map == {"*": ("claude", "gemini")}
    assert models_of(plan("llama", fallbacks=model_map)) == ["llama", "claude", "gemini"]


def test_plan_model_fallback_entries_are_all_model_fallbacks() -> None:
    p = plan("gemini", fallbacks={"*": ["claude"]}, priority_models=PRIO)
    assert [e.role for e in p.entries] == [Role.PRIMARY, Role.MODEL_FALLBACK, Role.MODEL_FALLBACK]


def test_plan_gateway_fallback_models_come_after_the_scope_map() -> None:
    policy = Policy(fallback=FallbackPolicy(models=("llama", "gemini")))
    assert models_of(plan("gpt-5", fallbacks={"*": ["claude"]}, policy=policy)) == [
        "gpt-5",
        "claude",
        "llama",
        "gemini",
    ]
    assert models_of(plan("gpt-5", policy=policy)) == ["gpt-5", "llama", "gemini"]


def test_plan_fallback_models_are_deduplicated_and_skip_the_requested_model() -> None:
    policy = Policy(fallback=FallbackPolicy(models=("claude", "gemini", "gpt-5")))
    p = plan("gpt-5", fallbacks={"gpt-5": ["claude", "claude", "gpt-5", "llama"]}, policy=policy)
    assert models_of(p) == ["gpt-5", "claude", "llama", "gemini"]
    assert len(keys(p.entries)) == len(set(keys(p.entries)))


def test_plan_fallback_to_a_model_not_in_the_catalog_adds_nothing() -> None:
    assert models_of(plan("gpt-5", fallbacks={"*": ["nope", "gemini"]})) == ["gpt-5", "gemini"]


# --------------------------------------------------------------------- cross provider


@pytest.mark.parametrize(
    ("cross", "expected"),
    [
        (True, ["openai/gpt-5", "azure/gpt-5-prod", "anthropic/claude-sonnet-4-5", "bedrock/anthropic.claude"]),
        (False, ["openai/gpt-5", "anthropic/claude-sonnet-4-5"]),
    ],
    ids=["all-offers", "first-offer-only"],
)
def test_plan_cross_provider_same_model(cross: bool, expected: list[str]) -> None:
    policy = Policy(fallback=FallbackPolicy(cross_provider_same_model=cross))
    p = plan("gpt-5", fallbacks={"*": ["claude"]}, policy=policy, priority_models=PRIO)
    assert keys(p.entries) == expected


def test_plan_without_cross_provider_keeps_the_healthiest_offer() -> None:
    policy = Policy(fallback=FallbackPolicy(cross_provider_same_model=False))
    p = plan(
        "llama",
        policy=policy,
        success_rate={"groq/llama-3.3-70b": 0.2, "together/llama-3.3-70b": 0.5, "fireworks/llama-v3p3-70b": 0.9},
    )
    assert keys(p.entries) == ["fireworks/llama-v3p3-70b"]


# --------------------------------------------------------------------- pinned


ALLOW_OTHERS = Policy(pinned=PinnedPolicy(allow_other_providers=True))

# seed 001's failover document: a pinned `provider/model` is tried on that provider's offers only.
PINNED_CATALOG: dict[str, tuple[Target, ...]] = {
    "m1": (t("pa", "m1", "m1"), t("pb", "m1", "m1")),
    "m2": (t("pb", "m2", "m2"),),
    "m4": (t("pa", "m4", "m4"), t("pb", "m4", "m4")),
}


@pytest.mark.parametrize(
    ("model", "kwargs", "expected"),
    [
        ("pa/m1", {"fallbacks": {"*": ["m4", "m2"]}}, ["pa/m1", "pa/m4"]),
        ("pa/m1", {"fallbacks": {"*": ["m4", "m2"]}, "policy": ALLOW_OTHERS}, ["pa/m1", "pa/m4", "pb/m4", "pb/m2"]),
        ("pb/m1", {"fallbacks": {"*": ["m2"]}}, ["pb/m1", "pb/m2"]),
        ("pa/m1", {"fallbacks": {"*": ["m2"]}}, ["pa/m1"]),
        ("pa/m1", {"policy": Policy(fallback=FallbackPolicy(models=("m2", "m4")))}, ["pa/m1", "pa/m4"]),
        ("pa/m1", {"reroutes": ["m2", "m4"]}, ["pa/m4"]),
        ("pa/m1", {"reroutes": ["m2", "m4"], "policy": ALLOW_OTHERS}, ["pb/m2", "pa/m4", "pb/m4"]),
        ("m1", {"fallbacks": {"*": ["m2"]}}, ["pa/m1", "pb/m1", "pb/m2"]),
    ],
    ids=[
        "fallback-models-confined",
        "allow-other-providers",
        "other-pin",
        "fallback-elsewhere-drops-out",
        "gateway-fallback-models-confined",
        "reroutes-confined",
        "reroutes-allowed",
        "not-pinned-untouched",
    ],
)
def test_plan_pinned_request_confines_the_whole_plan(
    model: str, kwargs: dict[str, object], expected: list[str]
) -> None:
    p = plan(model, catalog=PINNED_CATALOG, priority_models=frozenset(PINNED_CATALOG), **kwargs)  # type: ignore[arg-type]
    assert keys(p.entries) == expected


def test_plan_pinned_request_confines_the_special_lists() -> None:
    p = plan("azure/gpt-5", context_window={"*": ["claude", "gpt-5"]}, priority_models=PRIO)
    assert keys(p.entries) == ["azure/gpt-5-prod"]
    assert keys(p.context_window) == []
    allowed = plan("azure/gpt-5", context_window={"*": ["claude"]}, priority_models=PRIO, policy=ALLOW_OTHERS)
    assert keys(allowed.context_window) == ["anthropic/claude-sonnet-4-5", "bedrock/anthropic.claude"]


@hsettings(max_examples=60, deadline=None)
@given(
    pin=st.sampled_from(sorted(PROVIDERS - {"google"})),
    fallbacks=st.lists(st.sampled_from(sorted(CATALOG)), max_size=4),
    seed=st.integers(0, 1000),
)
def test_plan_pinned_request_never_leaves_its_provider(pin: str, fallbacks: list[str], seed: int) -> None:
    model = next(m for m, offers in CATALOG.items() if any(o.provider == pin for o in offers) and "/" not in m)
    p = plan(f"{pin}/{model}", fallbacks={"*": fallbacks}, context_window={"*": fallbacks}, seed=seed)
    assert {e.target.provider for e in p.entries + p.context_window} == {pin}


def test_plan_pinned_request_keeps_only_that_providers_offers() -> None:
    p = plan("azure/gpt-5", fallbacks={"*": ["claude"]}, priority_models=PRIO, policy=ALLOW_OTHERS)
    assert keys(p.entries) == ["azure/gpt-5-prod", "anthropic/claude-sonnet-4-5", "bedrock/anthropic.claude"]
    assert p.entries[0].role is Role.PRIMARY
    assert p.requested_model == "azure/gpt-5"


def test_plan_pinned_request_looks_fallbacks_up_by_the_catalog_model() -> None:
    p = plan("openai/gpt-5", fallbacks={"gpt-5": ["gemini"], "*": ["llama"]}, policy=ALLOW_OTHERS)
    assert models_of(p) == ["gpt-5", "gemini"]


def test_plan_exact_catalog_id_with_a_slash_wins_over_the_provider_prefix() -> None:
    p = plan("groq/compound")
    assert keys(p.entries) == ["groq/compound-beta"]
    assert p.entries[0].target.catalog_model == "groq/compound"


@pytest.mark.parametrize(
    "model",
    ["azure/claude", "nope/gpt-5", "openai/gpt-6", "google/llama", "openai/"],
    ids=["provider-without-that-model", "unknown-provider", "unknown-model", "pinned-elsewhere", "empty-model"],
)
def test_plan_unknown_pinned_request_raises_unknown_model(model: str) -> None:
    with pytest.raises(UnknownModel) as info:
        plan(model)
    assert info.value.model == model


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-5", ("gpt-5", None)),
        ("azure/gpt-5", ("gpt-5", "azure")),
        ("groq/compound", ("groq/compound", None)),
        ("groq/llama", ("llama", "groq")),
        ("nope/gpt-5", ("nope/gpt-5", None)),
        ("azure/", ("azure/", None)),
        ("azure/org/model", ("org/model", "azure")),
    ],
    ids=["plain", "pinned", "catalog-id-wins", "pinned-groq", "unknown-provider", "no-model", "model-with-slash"],
)
def test_split_pinned(model: str, expected: tuple[str, str | None]) -> None:
    assert split_pinned(model, CATALOG, PROVIDERS) == expected


# --------------------------------------------------------------------- fallback disabled


@pytest.mark.parametrize("cross", [True, False], ids=["cross-provider", "single-provider"])
def test_plan_fallback_disabled_keeps_only_the_first_models_offers(cross: bool) -> None:
    policy = Policy(fallback=FallbackPolicy(enabled=False, cross_provider_same_model=cross, models=("llama",)))
    p = plan("gpt-5", fallbacks={"*": ["claude"]}, policy=policy, priority_models=PRIO)
    assert keys(p.entries) == (["openai/gpt-5", "azure/gpt-5-prod"] if cross else ["openai/gpt-5"])


def test_plan_fallback_disabled_under_reroute_keeps_only_the_first_reroute_model() -> None:
    policy = Policy(fallback=FallbackPolicy(enabled=False))
    p = plan("gpt-5", reroutes=["claude", "gemini"], fallbacks={"*": ["llama"]}, policy=policy)
    assert models_of(p) == ["claude"]
    assert p.rerouted is True


# --------------------------------------------------------------------- special lists


def test_plan_context_window_and_content_policy_lists_are_kept_apart() -> None:
    p = plan(
        "gpt-5",
        fallbacks={"*": ["claude"]},
        context_window={"gpt-5": ["gemini", "gpt-5", "gemini"]},
        content_policy={"*": ["llama"]},
        priority_models=PRIO,
    )
    assert models_of(p) == ["gpt-5", "claude"]
    assert keys(p.context_window) == ["google/gemini-2.5-pro"]
    assert {e.role for e in p.context_window} == {Role.CONTEXT_WINDOW_FALLBACK}
    assert keys(p.content_policy) == ["groq/llama-3.3-70b", "together/llama-3.3-70b", "fireworks/llama-v3p3-70b"]
    assert {e.role for e in p.content_policy} == {Role.CONTENT_POLICY_FALLBACK}
    assert not any(e.is_reroute for e in p.context_window + p.content_policy)


def test_plan_special_lists_follow_cross_provider_setting() -> None:
    policy = Policy(fallback=FallbackPolicy(cross_provider_same_model=False))
    p = plan("gpt-5", context_window={"*": ["llama"]}, policy=policy, priority_models=PRIO)
    assert keys(p.context_window) == ["groq/llama-3.3-70b"]


def test_plan_special_list_for_another_model_does_not_apply() -> None:
    p = plan("gpt-5", context_window={"claude": ["gemini"]}, content_policy={"claude": ["gemini"]})
    assert p.context_window == () and p.content_policy == ()


# --------------------------------------------------------------------- ranking


def test_plan_priority_models_keep_their_configured_order() -> None:
    rates = {"groq/llama-3.3-70b": 0.1, "together/llama-3.3-70b": 0.5, "fireworks/llama-v3p3-70b": 1.0}
    for seed in range(20):
        p = plan("llama", success_rate=rates, seed=seed, priority_models=frozenset({"llama"}))
        assert keys(p.entries) == ["groq/llama-3.3-70b", "together/llama-3.3-70b", "fireworks/llama-v3p3-70b"]


def test_plan_health_ordered_models_rank_by_score() -> None:
    rates = {"groq/llama-3.3-70b": 0.1, "together/llama-3.3-70b": 0.5, "fireworks/llama-v3p3-70b": 1.0}
    p = plan("llama", success_rate=rates)
    assert keys(p.entries) == ["fireworks/llama-v3p3-70b", "together/llama-3.3-70b", "groq/llama-3.3-70b"]
    assert [e.role for e in p.entries] == [Role.PRIMARY, Role.PROVIDER_FALLBACK, Role.PROVIDER_FALLBACK]


@pytest.mark.parametrize(
    ("model", "expected"),
    [("a", ("x",)), ("b", ("s",)), ("c", ("s",))],
    ids=["own-entry", "falls-back-to-star", "star-again"],
)
def test_lookup_model_then_star(model: str, expected: tuple[str, ...]) -> None:
    assert lookup({"a": ["x"], "*": ["s"]}, model) == expected


def test_lookup_without_star_is_empty() -> None:
    assert lookup({"a": ["x"]}, "b") == ()


# --------------------------------------------------------------------- plan.max_offers (SPEC §10)


def test_plan_cap_keeps_the_first_offers_across_provider_and_model_fallbacks() -> None:
    p = plan("gpt-5", fallbacks={"*": ["claude", "llama"]}, priority_models=PRIO, max_offers=3)
    assert keys(p.entries) == ["openai/gpt-5", "azure/gpt-5-prod", "anthropic/claude-sonnet-4-5"]


def test_plan_cap_default_is_three() -> None:
    p = build_plan(
        "llama",
        catalog=CATALOG,
        providers=PROVIDERS,
        settings=RoutingSettings(fallbacks={"*": ("gpt-5",)}),
        policy=Policy(),
        health={},
        rng=random.Random(0),
    )
    assert len(p.entries) == 3 and Policy().plan.max_offers == 3


def test_plan_cap_applies_after_ordering_so_down_targets_are_dropped_first() -> None:
    down = {"groq/llama-3.3-70b": TargetHealth(standing=Standing.DOWN, back_in_s=5.0)}
    p = plan("llama", priority_models=PRIO, max_offers=2, health=down)
    assert keys(p.entries) == ["together/llama-3.3-70b", "fireworks/llama-v3p3-70b"]


def test_plan_cap_applies_to_each_special_list_on_its_own() -> None:
    p = plan(
        "gemini",
        context_window={"*": ["llama", "gpt-5"]},
        content_policy={"*": ["claude", "gpt-5"]},
        priority_models=PRIO,
        max_offers=2,
    )
    assert keys(p.context_window) == ["groq/llama-3.3-70b", "together/llama-3.3-70b"]
    assert keys(p.content_policy) == ["anthropic/claude-sonnet-4-5", "bedrock/anthropic.claude"]
    assert keys(p.entries) == ["google/gemini-2.5-pro"]


def test_plan_uncapped_lists_every_candidate() -> None:
    p = build_plan(
        "llama",
        catalog=CATALOG,
        providers=PROVIDERS,
        settings=RoutingSettings(fallbacks={"*": ("gpt-5",)}),
        policy=Policy(),
        health={},
        rng=random.Random(0),
        capped=False,
    )
    assert len(p.entries) == 5


@hsettings(max_examples=200, deadline=None)
@given(
    max_offers=st.integers(1, 8),
    seed=st.integers(0, 2**16),
    fallbacks=st.lists(st.sampled_from(sorted(CATALOG)), max_size=4),
)
def test_property_the_cap_keeps_a_prefix_of_the_uncapped_plan(max_offers: int, seed: int, fallbacks: list[str]) -> None:
    capped = plan("llama", fallbacks={"*": fallbacks}, priority_models=PRIO, max_offers=max_offers, seed=seed)
    whole = plan("llama", fallbacks={"*": fallbacks}, priority_models=PRIO, max_offers=20, seed=seed)
    assert capped.entries == whole.entries[: len(capped.entries)]
    assert len({e.target.key for e in capped.entries}) == min(max_offers, len({e.target.key for e in whole.entries}))


ALL_TARGETS = sorted({target.key for offers in CATALOG.values() for target in offers})


@hsettings(max_examples=300, deadline=None)
@given(
    model=st.sampled_from(sorted(CATALOG)),
    cross=st.booleans(),
    enabled=st.booleans(),
    seed=st.integers(0, 2**16),
    max_offers=st.integers(1, 8),
    fallbacks=st.lists(st.sampled_from(sorted(CATALOG)), max_size=3),
    context_window=st.lists(st.sampled_from(sorted(CATALOG)), max_size=2),
    health=st.dictionaries(
        st.sampled_from(ALL_TARGETS),
        st.builds(
            TargetHealth,
            score=st.floats(0.01, 1.0),
            standing=st.sampled_from(list(Standing)),
            back_in_s=st.floats(0.0, 60.0),
        ),
    ),
    preferences=st.builds(
        Preferences,
        order=st.lists(st.sampled_from(sorted(PROVIDERS)), max_size=2, unique=True).map(tuple),
        ignore=st.lists(st.sampled_from(sorted(PROVIDERS)), max_size=2, unique=True).map(tuple),
        allow_fallbacks=st.booleans(),
    ),
)
def test_property_the_uncapped_plan_without_health_lists_every_target_a_plan_may_hold(
    model: str,
    cross: bool,
    enabled: bool,
    seed: int,
    max_offers: int,
    fallbacks: list[str],
    context_window: list[str],
    health: dict[str, TargetHealth],
    preferences: Preferences,
) -> None:
    """The router reads the health of the targets of `capped=False` with no health, then plans
    with what it read: a target missing from that list would be planned as healthy, unread."""
    policy = Policy(
        fallback=FallbackPolicy(enabled=enabled, cross_provider_same_model=cross),
        plan=PlanPolicy(max_offers=max_offers),
    )
    settings = RoutingSettings(fallbacks={"*": tuple(fallbacks)}, context_window_fallbacks={"*": tuple(context_window)})

    def build(with_health: Mapping[str, TargetHealth], *, capped: bool, rng_seed: int) -> Plan:
        return build_plan(
            model,
            catalog=CATALOG,
            providers=PROVIDERS,
            settings=settings,
            policy=policy,
            health=with_health,
            rng=random.Random(rng_seed),
            capped=capped,
            preferences=preferences,
        )

    try:
        listed = build({}, capped=False, rng_seed=seed + 1)
    except NoMatchingOffer:  # the preferences leave nothing: the request is refused before any read
        return
    try:
        planned = build(health, capped=True, rng_seed=seed)
    except NoMatchingOffer:
        return
    every = {e.target.key for e in (*listed.entries, *listed.context_window, *listed.content_policy, *listed.plan_cap)}
    held = {
        e.target.key for e in (*planned.entries, *planned.context_window, *planned.content_policy, *planned.plan_cap)
    }
    assert held <= every
