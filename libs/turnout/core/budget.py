"""Budgets and spend strategies of a scope (SPEC §10).

Owns: which scope's spend a budget counts (the scope that sets it: the
org's total, a squad's, a key's), and the pure decision for one request from what that scope has
spent this period: refuse it (a hard budget spent), or serve it with the
model of the strategy rule whose threshold the spend has crossed, falling
back only to that rule's own fallback model. A scope with a strategy
ignores its reroute list.
Must not import: anything outside the standard library, msgspec and
`turnout.core`.
"""

from __future__ import annotations

import msgspec
from msgspec import UnsetType

from turnout.core.plan import RoutingSettings
from turnout.core.scopes import ScopeSettings
from turnout.core.spend import KEY_PREFIX, ORG_FIELD, SQUAD_PREFIX, Budget, StrategyRule, period_bounds


class BudgetScope(msgspec.Struct, frozen=True, kw_only=True):
    """A budget with the ledger field of the scope that set it.

    Attributes:
        budget: the budget, or None (a strategy with no budget: its rules
            never fire, but the reroute list is still ignored).
        field: the spend ledger field it counts (`org`, `squad:<name>`,
            `key:<name>`; `turnout.core.spend.scope_fields`).
        rules: the strategy in force (its rules, any order).
    """

    budget: Budget | None
    field: str
    rules: tuple[StrategyRule, ...] = ()


def budget_scope(
    org: ScopeSettings,
    squad: ScopeSettings | None,
    key: ScopeSettings | None,
    *,
    squad_name: str | None,
    key_name: str,
) -> BudgetScope | None:
    """The budget and strategy in force for a key (SPEC §6 scopes, §10).

    Each setting comes from the highest scope that sets it (org over squad
    over key); the budget counts the spend of the scope that set it.

    Returns:
        None when no scope sets a budget or a strategy.
    """
    budget: Budget | None = None
    field = ORG_FIELD
    rules: list[StrategyRule] | None = None
    for scope, name in ((org, ORG_FIELD), (squad, SQUAD_PREFIX + (squad_name or "")), (key, KEY_PREFIX + key_name)):
        if scope is None:
            continue
        if budget is None and not isinstance(scope.budget, UnsetType):
            budget, field = scope.budget, name
        if rules is None and not isinstance(scope.strategy, UnsetType):
            rules = scope.strategy
    if budget is None and rules is None:
        return None
    return BudgetScope(budget=budget, field=field, rules=tuple(rules or ()))


class Refused(msgspec.Struct, frozen=True, kw_only=True):
    """A hard budget is spent: answer 429 `budget_exceeded`.

    Attributes:
        resets_at_s: when the period resets, epoch seconds.
        retry_after_s: whole seconds from now until then (at least 1).
        spent_usd / budget_usd: the figures for the message.
    """

    resets_at_s: float
    retry_after_s: int
    spent_usd: float
    budget_usd: float


def firing_rule(scope: BudgetScope, spent_usd: float) -> StrategyRule | None:
    """The rule with the highest threshold that `spent_usd` has reached, or None."""
    if scope.budget is None:
        return None
    share = 100.0 * spent_usd / scope.budget.usd
    reached = [r for r in scope.rules if share >= r.at_percent]
    return max(reached, key=lambda r: r.at_percent) if reached else None


def decide(scope: BudgetScope, spent_usd: float, now_s: float) -> Refused | StrategyRule | None:
    """What one request gets, given what the budget's scope spent this period (SPEC §10).

    Args:
        scope: the budget in force and its strategy.
        spent_usd: the scope's spend in the budget's current period, USD.
        now_s: epoch seconds.

    Returns:
        `Refused` when a hard budget is spent (spent >= usd); else the rule
        that fires (`firing_rule`), or None (serve as asked).
    """
    if scope.budget is not None and scope.budget.hard and spent_usd >= scope.budget.usd:
        _, end = period_bounds(scope.budget.period, now_s)
        return Refused(
            resets_at_s=end,
            retry_after_s=max(1, int(end - now_s + 0.999)),
            spent_usd=spent_usd,
            budget_usd=scope.budget.usd,
        )
    return firing_rule(scope, spent_usd)


def with_strategy(settings: RoutingSettings, rule: StrategyRule | None, has_strategy: bool) -> RoutingSettings:
    """The routing settings of a request under a strategy (SPEC §10).

    A scope with a strategy ignores its reroute list. When `rule` fires, its
    model replaces the requested one (the requested model is not contacted,
    as with a reroute) and its `fallback` is the only model fallback.
    """
    if not has_strategy:
        return settings
    if rule is None:
        return msgspec.structs.replace(settings, reroutes=())
    return msgspec.structs.replace(
        settings,
        reroutes=(rule.model,),
        fallbacks={"*": (rule.fallback,)} if rule.fallback else {},
        strategy_rule=rule.name,
    )
