"""Budgets and spend strategies at the ingress (SPEC §10).

Owns: reading what the scope of a key's budget has spent this period (one
Redis round trip, only for keys under a budget with strategy rules: a hard
budget without them is checked by the admission script, which reads the
spend itself, `reservations.over_budget`), refusing a request whose hard
budget is spent (429 `budget_exceeded`, `Retry-After` until the period
resets), and handing on an identity whose routing settings
the strategy's rule has shaped (its model in place of the requested one, its
own fallback; the reroute list ignored). The decision itself is
`turnout.core.budget.decide`. The reservation of a request's worst case
against a hard budget, once its plan is known, is `turnout_ingress.limits.reservations`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import msgspec

from turnout.core.budget import Refused, decide, with_strategy
from turnout.errors import GatewayUnavailable
from turnout.state.errors import StateUnavailable
from turnout.tenancy.identity import Identity
from turnout_ingress.limits.reservations import spent_refusal

if TYPE_CHECKING:
    from turnout_ingress.state import IngressState


async def budgeted(state: IngressState, identity: Identity, now_s: float | None = None) -> Identity:
    """`identity` as its budget and strategy allow this request (SPEC §10).

    Returns:
        `identity` itself without a budget or strategy; else with routing
        settings shaped by `turnout.core.budget.with_strategy`
        (`settings.strategy_rule` names the rule that fired, if any).

    Raises:
        RequestRejected: 429 `budget_exceeded` with `Retry-After` (seconds
            until the period resets, UTC) when a hard budget is spent.
        GatewayUnavailable: Redis is unreachable (the spend is unknown).
    """
    scope = identity.budget
    if scope is None:
        return identity
    if not scope.rules:  # no strategy to shape routing: a hard budget is checked in the admission script
        return identity
    now = time.time() if now_s is None else now_s
    spent = 0.0
    if scope.budget is not None:
        try:
            spent = await state.obs.spend.spent(identity.org, scope.field, scope.budget.period, now)
        except StateUnavailable as exc:
            raise GatewayUnavailable(
                "The gateway's shared state is unreachable right now; retry shortly.",
                retry_after_s=1,
                code="redis_unavailable",
            ) from exc
    decision = decide(scope, spent, now)
    if isinstance(decision, Refused):
        period = scope.budget.period if scope.budget else "period"
        raise spent_refusal(scope.field, decision.budget_usd, period, decision.spent_usd, decision.resets_at_s, now)
    settings = with_strategy(identity.settings, decision, bool(scope.rules))
    return msgspec.structs.replace(identity, settings=settings)
