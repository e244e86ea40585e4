"""A hard budget without strategy rules costs no spend read before the plan: the admission
script refuses a spent one, with the same 429 naming the budget, its period and the spend
(issue #43: limits and budgets in the same round trip)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from turnout.core.budget import BudgetScope
from turnout.core.plan import RoutingSettings
from turnout.core.policy import Policy
from turnout.core.spend import Budget
from turnout.state.limit_store import Reservation
from turnout.tenancy.identity import Identity
from turnout_ingress.limits.budgets import budgeted
from turnout_ingress.limits.reservations import over_budget

NOW_S = datetime(2026, 12, 8, 12, 0, tzinfo=UTC).timestamp()
IDENTITY = Identity(
    org="acme",
    squad=None,
    key="bot",
    admin=False,
    settings=RoutingSettings(),
    policy=Policy(),
    budget=BudgetScope(budget=Budget(usd=1.0, period="day", hard=True), field="key:bot"),
)
RESERVATION = Reservation(spend_key="s", field="key:bot", set_key="r", budget_micro=1_000_000, worst_micro=0)


class _NoRead:
    """An ingress state whose spend ledger must not be read."""

    @property
    def obs(self) -> Any:
        raise AssertionError("the spend was read before the plan")


async def test_a_hard_budget_without_rules_is_not_read_before_the_plan() -> None:
    assert await budgeted(_NoRead(), IDENTITY, NOW_S) is IDENTITY  # type: ignore[arg-type]


def test_a_spent_budget_refused_by_the_script_names_it_its_period_and_the_spend() -> None:
    refused = over_budget(IDENTITY, RESERVATION, 1_200_000, 0, NOW_S)
    assert (refused.status_code, refused.code) == (429, "budget_exceeded")
    assert refused.message == (
        "The key `bot` budget of 1 USD per day is spent (1.2 USD); it resets at 2026-12-09T00:00:00Z."
    )
    assert refused.headers == {"retry-after": str(12 * 3600), "x-should-retry": "false"}


def test_a_worst_case_over_what_is_left_still_says_what_is_left() -> None:
    refused = over_budget(IDENTITY, _worst(600_000), 500_000, 0, NOW_S)
    assert "could cost up to 0.6 USD, more than the 0.5 USD left" in refused.message


def _worst(micro: int) -> Reservation:
    return msgspec.structs.replace(RESERVATION, worst_micro=micro)
