"""Table tests and properties for turnout.core.preferences and their place in the plan (SPEC §10)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from turnout.core.ordering import ORDERINGS, OfferPrice, OrderSettings, Standing, TargetHealth
from turnout.core.plan import NoMatchingOffer, Plan, RoutingSettings, UnknownModel, build_plan
from turnout.core.policy import PlanPolicy, Policy
from turnout.core.preferences import (
    InvalidPreferences,
    MaxPrice,
    Preferences,
    admits,
    apply,
    decode_preferences,
)
from turnout.core.types import Target


def t(provider: str, model: str) -> Target:
    return Target(provider=provider, model=model, catalog_model=model.split("@")[0])


CATALOG = {
    "llama": (t("groq", "llama@g"), t("together", "llama@t"), t("fireworks", "llama@f")),
    "small": (t("groq", "small@g"), t("deepinfra", "small@d")),
}
PROVIDERS = frozenset({"groq", "together", "fireworks", "deepinfra", "premium"})
PRICES = {
    "groq/llama@g": OfferPrice(input_usd_per_mtok=0.6, output_usd_per_mtok=0.8),
    "together/llama@t": OfferPrice(input_usd_per_mtok=0.9, output_usd_per_mtok=0.9),
    "fireworks/llama@f": OfferPrice(input_usd_per_mtok=3.0, output_usd_per_mtok=9.0),
    "groq/small@g": OfferPrice(input_usd_per_mtok=0.05, output_usd_per_mtok=0.08),
    "deepinfra/small@d": OfferPrice(input_usd_per_mtok=0.03, output_usd_per_mtok=0.05),
}
SETTINGS = OrderSettings(explore=0.0, prices=PRICES)


def plan(
    model: str = "llama",
    prefs: Preferences = Preferences(),
    *,
    fallbacks: tuple[str, ...] = ("small",),
    health: dict[str, TargetHealth] | None = None,
    seed: int = 0,
    max_offers: int = 20,
    reroutes: tuple[str, ...] = (),
) -> Plan:
    return build_plan(
        model,
        catalog=CATALOG,
        providers=PROVIDERS,
        settings=RoutingSettings(
            reroutes=reroutes, fallbacks={"*": fallbacks}, context_window_fallbacks={"*": ("small",)}
        ),
        policy=Policy(plan=PlanPolicy(max_offers=max_offers)),
        health=health or {},
        rng=random.Random(seed),
        orders={m: "priority" for m in CATALOG},
        order_settings=SETTINGS,
        preferences=prefs,
    )


def keys(p: Plan) -> list[str]:
    return [e.target.key for e in p.entries]


# ------------------------------------------------------------------ decoding


def test_decode_absent_or_null_is_no_preference() -> None:
    assert decode_preferences(None) == Preferences()


def test_decode_every_field() -> None:
    prefs = decode_preferences(
        {
            "order": ["together"],
            "only": ["groq", "together"],
            "ignore": ["fireworks"],
            "sort": "latency",
            "max_price": {"prompt": 1, "completion": 2.5},
            "allow_fallbacks": False,
        }
    )
    assert prefs == Preferences(
        order=("together",),
        only=("groq", "together"),
        ignore=("fireworks",),
        sort="latency",
        max_price=MaxPrice(prompt=1.0, completion=2.5),
        allow_fallbacks=False,
    )


@pytest.mark.parametrize(
    ("value", "param"),
    [
        ("groq", "provider"),
        ([], "provider"),
        ({"orderr": ["groq"]}, "provider.orderr"),
        ({"order": "groq"}, "provider.order"),
        ({"only": ["groq", 3]}, "provider.only[1]"),
        ({"ignore": [""]}, "provider.ignore[0]"),
        ({"sort": "cheapest"}, "provider.sort"),
        ({"sort": "health"}, "provider.sort"),
        ({"max_price": {"prompt": -1}}, "provider.max_price.prompt"),
        ({"max_price": {"request": 1}}, "provider.max_price.request"),
        ({"max_price": 5}, "provider.max_price"),
        ({"allow_fallbacks": "no"}, "provider.allow_fallbacks"),
    ],
    ids=[
        "a-string",
        "a-list",
        "unknown-field",
        "order-not-a-list",
        "only-not-strings",
        "ignore-empty-name",
        "sort-unknown",
        "sort-not-per-request",
        "max-price-negative",
        "max-price-unknown-field",
        "max-price-not-an-object",
        "allow-fallbacks-not-bool",
    ],
)
def test_decode_invalid_names_the_field(value: Any, param: str) -> None:
    with pytest.raises(InvalidPreferences) as info:
        decode_preferences(value)
    assert info.value.param == param
    assert f"`{param}`" in str(info.value) or param == "provider"


# ------------------------------------------------------------------ the rules


def test_admits_only_ignore_and_max_price() -> None:
    groq, fire = CATALOG["llama"][0], CATALOG["llama"][2]
    assert admits(groq, Preferences(only=("groq",)), PRICES) and not admits(fire, Preferences(only=("groq",)), PRICES)
    assert not admits(groq, Preferences(ignore=("groq",)), PRICES)
    cap = Preferences(max_price=MaxPrice(completion=1.0))
    assert admits(groq, cap, PRICES) and not admits(fire, cap, PRICES)
    assert not admits(t("custom:acme:vllm", "llama@c"), cap, PRICES)  # unknown price: not shown under the cap
    assert admits(t("custom:acme:vllm", "llama@c"), Preferences(max_price=MaxPrice()), PRICES)


def test_order_puts_named_providers_first_but_never_before_a_healthy_one_when_down() -> None:
    ranked = CATALOG["llama"]
    prefs = Preferences(order=("fireworks", "together"))
    assert [x.provider for x in apply(ranked, prefs, PRICES, {})] == ["fireworks", "together", "groq"]
    down = {"fireworks/llama@f": TargetHealth(standing=Standing.DOWN, back_in_s=4.0)}
    assert [x.provider for x in apply(ranked, prefs, PRICES, down)] == ["together", "groq", "fireworks"]


# ------------------------------------------------------------------ in the plan


@pytest.mark.parametrize(
    ("prefs", "expected"),
    [
        (Preferences(), ["groq/llama@g", "together/llama@t", "fireworks/llama@f", "groq/small@g", "deepinfra/small@d"]),
        (Preferences(only=("groq",)), ["groq/llama@g", "groq/small@g"]),
        (Preferences(ignore=("groq",)), ["together/llama@t", "fireworks/llama@f", "deepinfra/small@d"]),
        (
            Preferences(max_price=MaxPrice(prompt=1.0)),
            ["groq/llama@g", "together/llama@t", "groq/small@g", "deepinfra/small@d"],
        ),
        (
            Preferences(order=("together",)),
            ["together/llama@t", "groq/llama@g", "fireworks/llama@f", "groq/small@g", "deepinfra/small@d"],
        ),
        (
            Preferences(sort="price"),
            ["groq/llama@g", "together/llama@t", "fireworks/llama@f", "deepinfra/small@d", "groq/small@g"],
        ),
        (Preferences(allow_fallbacks=False), ["groq/llama@g"]),
        (
            Preferences(allow_fallbacks=False, order=("fireworks", "together")),
            ["fireworks/llama@f", "together/llama@t"],
        ),
    ],
    ids=["none", "only", "ignore", "max-price", "order", "sort-price", "no-fallbacks", "no-fallbacks-with-order"],
)
def test_plan_with_preferences(prefs: Preferences, expected: list[str]) -> None:
    assert keys(plan(prefs=prefs)) == expected


def test_plan_without_fallbacks_has_no_special_lists() -> None:
    assert plan().context_window and not plan(prefs=Preferences(allow_fallbacks=False)).context_window


def test_plan_preferences_that_leave_nothing_raise_no_matching_offer() -> None:
    with pytest.raises(NoMatchingOffer) as info:
        plan(prefs=Preferences(only=("premium",)))  # a configured provider, but no offer of these models
    assert info.value.model == "llama"


def test_plan_preferences_never_rescue_an_unknown_model() -> None:
    with pytest.raises(UnknownModel):
        plan("gpt-5", Preferences(only=("groq",)))


def test_plan_preferences_apply_to_reroute_models_and_never_bring_back_the_requested_one() -> None:
    p = plan("llama", Preferences(only=("groq", "together")), reroutes=("small",), fallbacks=())
    assert keys(p) == ["groq/small@g"]


def test_plan_cap_counts_after_preferences() -> None:
    assert keys(plan(prefs=Preferences(ignore=("groq",)), max_offers=3)) == [
        "together/llama@t",
        "fireworks/llama@f",
        "deepinfra/small@d",
    ]


names = st.lists(st.sampled_from(sorted(PROVIDERS)), max_size=4, unique=True).map(tuple)
preferences = st.builds(
    Preferences,
    order=names,
    only=st.none() | names,
    ignore=names,
    sort=st.none() | st.sampled_from(["price", "latency", "throughput"]),
    max_price=st.none()
    | st.builds(MaxPrice, prompt=st.none() | st.floats(0, 5), completion=st.none() | st.floats(0, 10)),
    allow_fallbacks=st.booleans(),
)


@hsettings(max_examples=400, deadline=None)
@given(prefs=preferences, seed=st.integers(0, 2**16), reroute=st.booleans())
def test_property_preferences_only_narrow_the_keys_plan(prefs: Preferences, seed: int, reroute: bool) -> None:
    """SPEC §10: a request can narrow, never widen: every target of a plan
    with preferences is a target of the same key's plan without them, and
    respects only / ignore / max_price."""
    reroutes = ("small",) if reroute else ()
    wide = plan(reroutes=reroutes, seed=seed)
    allowed = {e.target.key for e in (*wide.entries, *wide.context_window)}
    try:
        narrow = plan(prefs=prefs, reroutes=reroutes, seed=seed)
    except NoMatchingOffer:
        return
    for e in (*narrow.entries, *narrow.context_window):
        assert e.target.key in allowed
        assert admits(e.target, prefs, PRICES)
    if not prefs.allow_fallbacks:
        assert len({e.target.catalog_model for e in narrow.entries}) == 1 and narrow.context_window == ()


def test_plan_fallbacks_form_their_own_list_and_go_with_allow_fallbacks_false() -> None:
    def with_plan_cap(prefs: Preferences) -> Plan:
        return build_plan(
            "llama",
            catalog=CATALOG,
            providers=PROVIDERS,
            settings=RoutingSettings(plan_fallbacks={"llama": ("small",)}),
            policy=Policy(),
            health={},
            rng=random.Random(0),
            orders={m: "priority" for m in CATALOG},
            order_settings=SETTINGS,
            preferences=prefs,
        )

    p = with_plan_cap(Preferences(ignore=("groq",)))
    assert [e.target.key for e in p.plan_cap] == ["deepinfra/small@d"]
    assert all(e.role.value == "plan_fallback" for e in p.plan_cap)
    assert with_plan_cap(Preferences(allow_fallbacks=False)).plan_cap == ()


@pytest.mark.parametrize(
    ("prefs", "narrows"),
    [
        (Preferences(), False),
        (Preferences(order=("sim-b",)), False),
        (Preferences(sort="price"), False),
        (Preferences(order=("sim-b",), sort="latency"), False),
        (Preferences(only=("sim-a",)), True),
        (Preferences(only=()), True),
        (Preferences(ignore=("sim-a",)), True),
        (Preferences(max_price=MaxPrice(prompt=1.0)), True),
        (Preferences(max_price=MaxPrice()), True),
        (Preferences(allow_fallbacks=False), True),
        (Preferences(order=("sim-b",), allow_fallbacks=False), True),
    ],
)
def test_narrows_is_true_exactly_when_a_field_may_leave_offers_out(prefs: Preferences, narrows: bool) -> None:
    """What the 503 `circuit_open` message leans on: `order` and `sort` only reorder."""
    assert prefs.narrows is narrows


@hsettings(max_examples=300, deadline=None)
@given(
    strategy=st.sampled_from(sorted(ORDERINGS)),
    health=st.dictionaries(
        st.sampled_from(sorted(PRICES)),
        st.builds(
            TargetHealth,
            score=st.floats(0.01, 1.0),
            standing=st.sampled_from(Standing),
            back_in_s=st.floats(0.0, 100.0),
            ttft_ms=st.none() | st.floats(1.0, 5000.0),
        ),
    ),
    sort=st.none() | st.sampled_from(("price", "latency", "throughput")),
    seed=st.integers(0, 2**32),
)
def test_property_preferences_that_neither_narrow_nor_order_keep_every_ranking_as_is(
    strategy: str, health: dict[str, TargetHealth], sort: Any, seed: int
) -> None:
    """What lets `build_plan` skip `apply` for such preferences: every ordering already ranks DOWN targets last."""
    prefs = Preferences(sort=sort)
    assert not prefs.narrows and not prefs.order
    ranked = ORDERINGS[strategy](CATALOG["llama"], health, SETTINGS, random.Random(seed))
    assert apply(ranked, prefs, PRICES, health) == ranked
    assert apply(ranked, prefs, PRICES, health, listing=True) == ranked


def test_an_unknown_sort_lists_the_strategies() -> None:
    with pytest.raises(InvalidPreferences) as info:
        decode_preferences({"sort": "cheap"})
    assert str(info.value) == (
        "`provider.sort` is invalid: Invalid enum value 'cheap' (one of latency, price, throughput)."
    )
