"""Table tests and properties for turnout.core.budget (SPEC §10 budgets and strategies)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnout.core.budget import BudgetScope, Refused, budget_scope, decide, firing_rule, with_strategy
from turnout.core.plan import RoutingSettings
from turnout.core.scopes import ScopeSettings
from turnout.core.spend import Budget, StrategyRule, period_bounds

NOW = 1_796_131_500.0  # 2026-12-01T13:25:00Z
ECONOMY = StrategyRule(name="economy", at_percent=80, model="small", fallback="tiny")
HALF = StrategyRule(name="half", at_percent=50, model="medium")
SOFT = BudgetScope(budget=Budget(usd=100), field="org", rules=(ECONOMY, HALF))
HARD = BudgetScope(budget=Budget(usd=100, period="day", hard=True), field="key:ci", rules=(ECONOMY,))


@pytest.mark.parametrize(
    ("scope", "spent", "expected"),
    [
        (SOFT, 0.0, None),
        (SOFT, 49.99, None),
        (SOFT, 50.0, "half"),
        (SOFT, 79.0, "half"),
        (SOFT, 80.0, "economy"),
        (SOFT, 500.0, "economy"),
        (HARD, 85.0, "economy"),
        (HARD, 100.0, "refused"),
        (HARD, 250.0, "refused"),
        (BudgetScope(budget=None, field="org", rules=(ECONOMY,)), 1e9, None),
    ],
    ids=[
        "nothing-spent",
        "under-the-first-rule",
        "at-the-first-rule",
        "between",
        "at-the-second-rule",
        "past-the-soft-budget-still-served",
        "hard-under-its-amount",
        "hard-spent",
        "hard-overspent",
        "strategy-without-budget",
    ],
)
def test_decide(scope: BudgetScope, spent: float, expected: str | None) -> None:
    decision = decide(scope, spent, NOW)
    if expected == "refused":
        assert isinstance(decision, Refused)
        assert decision.resets_at_s == period_bounds("day", NOW)[1]
        assert decision.retry_after_s == int(decision.resets_at_s - NOW)  # 10:35:00 to midnight UTC
    else:
        assert (decision.name if isinstance(decision, StrategyRule) else decision) == expected


def test_budget_counts_the_spend_of_the_scope_that_sets_it() -> None:
    org = ScopeSettings()
    squad = ScopeSettings(budget=Budget(usd=10), strategy=[HALF])
    key = ScopeSettings(budget=Budget(usd=1), strategy=[ECONOMY])
    assert budget_scope(org, squad, key, squad_name="research", key_name="ci") == BudgetScope(
        budget=Budget(usd=10), field="squad:research", rules=(HALF,)
    )
    assert budget_scope(ScopeSettings(budget=Budget(usd=5)), squad, key, squad_name="research", key_name="ci") == (
        BudgetScope(budget=Budget(usd=5), field="org", rules=(HALF,))
    )
    assert budget_scope(org, None, key, squad_name=None, key_name="ci") == BudgetScope(
        budget=Budget(usd=1), field="key:ci", rules=(ECONOMY,)
    )
    assert budget_scope(org, None, None, squad_name=None, key_name="ci") is None


def test_with_strategy_substitutes_the_rules_model_and_fallback_and_ignores_reroutes() -> None:
    settings = RoutingSettings(reroutes=("other",), fallbacks={"*": ("big",)})
    fired = with_strategy(settings, ECONOMY, True)
    assert (fired.reroutes, dict(fired.fallbacks), fired.strategy_rule) == (("small",), {"*": ("tiny",)}, "economy")
    quiet = with_strategy(settings, None, True)
    assert (quiet.reroutes, dict(quiet.fallbacks), quiet.strategy_rule) == ((), {"*": ("big",)}, None)
    assert with_strategy(settings, None, False) == settings
    assert dict(with_strategy(settings, HALF, True).fallbacks) == {}


@given(
    spent=st.floats(0, 1e6),
    usd=st.floats(0.01, 1e5),
    thresholds=st.lists(st.floats(0, 200), min_size=1, max_size=5, unique=True),
)
def test_property_the_firing_rule_is_the_highest_threshold_reached(
    spent: float, usd: float, thresholds: list[float]
) -> None:
    rules = tuple(StrategyRule(name=f"r{i}", at_percent=t, model="m") for i, t in enumerate(thresholds))
    rule = firing_rule(BudgetScope(budget=Budget(usd=usd), field="org", rules=rules), spent)
    reached = [t for t in thresholds if 100 * spent / usd >= t]
    assert (rule.at_percent if rule else None) == (max(reached) if reached else None)
