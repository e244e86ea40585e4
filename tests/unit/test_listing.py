"""`Listings`: one uncapped build serves every request with the same inputs, and what it returns is
always what a build for that request would list (hypothesis over mixed requests and catalog swaps)."""

from __future__ import annotations

import random
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import turnout.listing
from turnout.catalog import Catalog
from turnout.config import parse_config
from turnout.core.ordering import OrderSettings
from turnout.core.plan import KeyFacts, NoMatchingOffer, Plan, RoutingSettings, UnknownModel, build_plan
from turnout.core.policy import Policy
from turnout.core.preferences import Preferences
from turnout.listing import Listings

CONFIG = """
providers:
  a: {kind: openai_compatible, base_url: "http://127.0.0.1:9/v1", api_key: k}
  b: {kind: openai_compatible, base_url: "http://127.0.0.1:9/v1", api_key: k}
  c: {kind: openai_compatible, base_url: "http://127.0.0.1:9/v1", api_key: k}
models:
  m1: {offers: [{provider: a, model: m1}, {provider: b, model: m1}]}
  m2: {offers: [{provider: b, model: m2}, {provider: c, model: m2}]}
  m3: {offers: [{provider: c, model: m3}]}
"""
CATALOGS = (
    Catalog(parse_config(CONFIG, env={})),
    Catalog(parse_config(CONFIG.replace("a, model: m1", "c, model: m1"), env={})),
)
SETTINGS = (
    RoutingSettings(),
    RoutingSettings(fallbacks={"m1": ("m2",)}),
    RoutingSettings(fallbacks={"*": ("m3",)}, plan_fallbacks={"m1": ("m3",)}),
    RoutingSettings(reroutes=("m2",)),
    RoutingSettings(context_window_fallbacks={"m2": ("m1",)}),
)
POLICIES = (
    Policy(),
    msgspec.structs.replace(Policy(), fallback=msgspec.structs.replace(Policy().fallback, enabled=False)),
    msgspec.structs.replace(Policy(), fallback=msgspec.structs.replace(Policy().fallback, models=("m3",))),
)
PREFERENCES = (
    Preferences(),
    Preferences(only=("b",)),
    Preferences(ignore=("b", "c")),
    Preferences(order=("c",), allow_fallbacks=False),
    Preferences(sort="price"),
)


def uncapped(
    catalog: Catalog,
    model: str,
    settings: RoutingSettings,
    policy: Policy,
    prefs: Preferences,
    keys: KeyFacts | None = None,
) -> Plan:
    """What the router builds for a listing, with a fixed draw so that two builds compare equal."""
    facts: dict[str, Any] = {"catalog": catalog.models, "providers": catalog.provider_names, "orders": catalog.orders}
    rest: dict[str, Any] = {"settings": settings, "policy": policy, "preferences": prefs, "keys": keys}
    return build_plan(
        model,
        rng=random.Random(0),
        order_settings=catalog.order_settings(OrderSettings()),
        health={},
        capped=False,
        **facts,
        **rest,
    )


class Counted:
    def __init__(self) -> None:
        self.builds = 0

    def __call__(self, *args: object) -> Plan:
        self.builds += 1
        return uncapped(*args)  # type: ignore[arg-type]


def listed(plan: Plan) -> tuple[str, ...]:
    return tuple(e.target.key for e in (*plan.entries, *plan.context_window, *plan.content_policy, *plan.plan_cap))


def test_one_build_serves_every_request_with_the_same_inputs() -> None:
    build = Counted()
    listings = Listings(build)
    first = listings.of(CATALOGS[0], "m1", SETTINGS[1], POLICIES[0], Preferences())
    for _ in range(5):  # equal inputs, new objects (as a worker decodes them from each job)
        again = listings.of(
            CATALOGS[0], "m1", RoutingSettings(fallbacks={"m1": ("m2",)}), Policy(), Preferences(only=None)
        )
        assert again is first
    assert build.builds == 1
    assert sorted(first.targets) == ["a/m1", "b/m1", "b/m2", "c/m2"]
    assert not first.plan_cap


@pytest.mark.parametrize(
    "change",
    [
        {"model": "m2"},
        {"settings": SETTINGS[2]},
        {"policy": POLICIES[1]},
        {"policy": POLICIES[2]},
        {"prefs": Preferences(only=("b",))},
        {"catalog": CATALOGS[1]},
        {"keys": KeyFacts(own_providers=frozenset({"a"}))},
    ],
    ids=["model", "settings", "fallback-enabled", "fallback-models", "preferences", "catalog", "keys"],
)
def test_each_input_that_shapes_the_listing_builds_anew(change: dict[str, object]) -> None:
    build = Counted()
    listings = Listings(build)
    base: dict[str, object] = {
        "catalog": CATALOGS[0],
        "model": "m1",
        "settings": SETTINGS[1],
        "policy": POLICIES[0],
        "prefs": Preferences(),
        "keys": None,
    }
    listings.of(*base.values())  # type: ignore[arg-type]
    listings.of(*{**base, **change}.values())  # type: ignore[arg-type]
    assert build.builds == 2


def test_a_plan_caps_setting_alone_does_not_build_anew() -> None:
    build = Counted()
    listings = Listings(build)
    capped = msgspec.structs.replace(Policy(), plan=msgspec.structs.replace(Policy().plan, max_offers=1))
    listings.of(CATALOGS[0], "m1", SETTINGS[0], Policy(), Preferences())
    listings.of(CATALOGS[0], "m1", SETTINGS[0], capped, Preferences())  # the uncapped listing ignores the cap
    assert build.builds == 1


@pytest.mark.parametrize(
    ("model", "prefs", "error"),
    [("nope", Preferences(), UnknownModel), ("m3", Preferences(only=("a",)), NoMatchingOffer)],
)
def test_a_failed_build_raises_each_time_and_is_not_kept(model: str, prefs: Preferences, error: type) -> None:
    build = Counted()
    listings = Listings(build)
    for _ in range(2):
        with pytest.raises(error):
            listings.of(CATALOGS[0], model, SETTINGS[0], POLICIES[0], prefs)
    assert build.builds == 2


def test_a_full_memo_starts_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turnout.listing, "MEMO_MAX", 2)
    build = Counted()
    listings = Listings(build)
    for model in ("m1", "m2", "m3", "m1"):
        listings.of(CATALOGS[0], model, SETTINGS[0], POLICIES[0], Preferences())
    assert build.builds == 4  # m3 found the memo full: m1 was dropped with it
    listings.of(CATALOGS[0], "m3", SETTINGS[0], POLICIES[0], Preferences())
    assert build.builds == 4


@given(
    st.lists(
        st.tuples(
            st.sampled_from(range(len(CATALOGS))),
            st.sampled_from(("m1", "m2", "m3")),
            st.sampled_from(range(len(SETTINGS))),
            st.sampled_from(range(len(POLICIES))),
            st.sampled_from(range(len(PREFERENCES))),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_property_the_memo_always_answers_what_a_build_would_list(
    requests: list[tuple[int, str, int, int, int]],
) -> None:
    listings = Listings(uncapped)
    for c, model, s, p, prefs in requests:
        args = (CATALOGS[c], model, SETTINGS[s], POLICIES[p], PREFERENCES[prefs])
        try:
            expected = uncapped(*args)
        except (UnknownModel, NoMatchingOffer) as exc:
            with pytest.raises(type(exc)):
                listings.of(*args)
            continue
        got = listings.of(*args)
        assert got.targets == listed(expected)
        assert got.plan_cap == bool(expected.plan_cap)
