"""Table tests for turnout.core.considered and `Plan.left_out` (issue #45 item 6; seed 001:
a request's detail names the provider that served it and the other offers considered)."""

from __future__ import annotations

import random

import msgspec
import pytest
from driver import drive, entry, err, ok, plan_of
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from turnout.core.considered import Considered, considered_so_far
from turnout.core.loop import AttemptRecord, SkipReason
from turnout.core.ordering import OrderSettings
from turnout.core.plan import KeyFacts, Role, RoutingSettings, build_plan
from turnout.core.policy import FallbackPolicy, PlanPolicy, Policy, RetryPolicy
from turnout.core.preferences import Preferences
from turnout.core.types import Target


def t(provider: str, model: str = "llama") -> Target:
    return Target(provider=provider, model=model, catalog_model=model)


CATALOG = {"llama": (t("groq"), t("together"), t("fireworks")), "small": (t("groq", "small"),)}
PROVIDERS = frozenset({"groq", "together", "fireworks"})


def left(
    model: str,
    *,
    max_offers: int = 3,
    prefs: Preferences = Preferences(),
    keys: KeyFacts | None = None,
    cross: bool = True,
) -> list[tuple[str, str]]:
    plan = build_plan(
        model,
        catalog=CATALOG,
        providers=PROVIDERS,
        settings=RoutingSettings(fallbacks={"*": ("small",)}),
        policy=Policy(plan=PlanPolicy(max_offers=max_offers), fallback=FallbackPolicy(cross_provider_same_model=cross)),
        health={},
        rng=random.Random(0),
        orders={"llama": "priority"},
        order_settings=OrderSettings(explore=0.0),
        preferences=prefs,
        keys=keys,
    )
    return [(c.key, c.reason) for c in plan.left_out]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, [("groq/small", "capped")]),
        ({"max_offers": 2}, [("fireworks/llama", "capped"), ("groq/small", "capped")]),
        ({"max_offers": 4}, []),
        ({"max_offers": 4, "prefs": Preferences(ignore=("together",))}, [("together/llama", "preferences")]),
        (
            {"max_offers": 4, "keys": KeyFacts(shared_providers=frozenset({"groq", "fireworks"}))},
            [("together/llama", "no_credential")],
        ),
        (
            {"prefs": Preferences(only=("groq",))},
            [("together/llama", "preferences"), ("fireworks/llama", "preferences")],
        ),
        (
            {"max_offers": 4, "cross": False},
            [("together/llama", "one_per_model"), ("fireworks/llama", "one_per_model")],
        ),
    ],
    ids=["past-max-offers", "max-offers-2", "all-fit", "ignored-provider", "no-credential", "only", "one-per-model"],
)
def test_the_plan_says_which_offers_it_left_out_and_why(
    kwargs: dict[str, object], expected: list[tuple[str, str]]
) -> None:
    assert left("llama", **kwargs) == expected  # type: ignore[arg-type]


A, B, C = (
    entry("sim-a", "m-a", catalog_model="m"),
    entry("sim-b", "m-b", Role.PROVIDER_FALLBACK, catalog_model="m"),
    entry("sim-c", "m-c", Role.PROVIDER_FALLBACK, catalog_model="m"),
)
CAPPED = Considered(provider="sim-d", model="m-d", catalog_model="m", reason="capped")


PLAN = msgspec.structs.replace(plan_of(A, B, C), left_out=(CAPPED,))
"""Three targets walked, one the builder left out past `plan.max_offers`."""


def reasons(records: tuple[AttemptRecord, ...]) -> list[tuple[str, str, float | None]]:
    return [(c.key, c.reason, c.reopen_in_s) for c in records[-1].considered]


def test_served_first_the_rest_were_not_reached() -> None:
    run = drive(PLAN, Policy(), {"sim-a/m-a": [ok()]})
    assert reasons(run.records) == [
        ("sim-b/m-b", "not_reached", None),
        ("sim-c/m-c", "not_reached", None),
        ("sim-d/m-d", "capped", None),
    ]


def test_a_skipped_target_says_why_and_when_it_returns() -> None:
    run = drive(
        PLAN,
        Policy(retry=RetryPolicy(max_retries=0)),
        {"sim-a/m-a": [err(503)], "sim-c/m-c": [ok()]},
        skip=lambda d, now: (SkipReason.CIRCUIT_OPEN, 12.5) if d.entry is B else None,
    )
    assert [r.target.key for r in run.records] == ["sim-a/m-a", "sim-c/m-c"]
    assert reasons(run.records) == [("sim-b/m-b", "circuit_open", 12.5), ("sim-d/m-d", "capped", None)]
    assert [(c.key, c.reason) for c in run.records[0].considered][:2] == [
        ("sim-b/m-b", "not_reached"),
        ("sim-c/m-c", "not_reached"),
    ]


@hsettings(max_examples=80, deadline=None)
@given(
    fails=st.lists(st.booleans(), min_size=3, max_size=3),
    skipped=st.lists(st.booleans(), min_size=3, max_size=3),
    retries=st.integers(0, 2),
)
def test_every_offer_is_attempted_or_considered_never_both(
    fails: list[bool], skipped: list[bool], retries: int
) -> None:
    """Invariant: as of every attempt's end, the plan's targets and the builder's left-outs are
    each either attempted or listed as considered, once, never both."""
    entries = (A, B, C)
    script = {e.target.key: [err(503) if f else ok()] * 3 for e, f in zip(entries, fails, strict=True)}
    run = drive(
        PLAN,
        Policy(retry=RetryPolicy(max_retries=retries, base_ms=0)),
        script,
        skip=lambda d, now: (SkipReason.RESTING, 3.0) if skipped[entries.index(d.entry)] else None,
    )
    for i, record in enumerate(run.records):
        tried = {r.target.key for r in run.records[: i + 1]}
        listed = [c.key for c in record.considered]
        assert len(listed) == len(set(listed)) and not tried & set(listed)
        assert tried | set(listed) == {"sim-a/m-a", "sim-b/m-b", "sim-c/m-c", "sim-d/m-d"}


def test_considered_so_far_keeps_plan_order_then_left_outs_without_duplicates() -> None:
    got = considered_so_far((CAPPED, CAPPED), [A.target, B.target, A.target], [A.target], [(B.target, "ramping", 1.0)])
    assert [(c.key, c.reason) for c in got] == [("sim-b/m-b", "ramping"), ("sim-d/m-d", "capped")]
