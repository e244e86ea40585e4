"""Spend periods and budgets: which ledger entries a cost goes to (SPEC §10).

Owns: the periods spend is kept for (a UTC calendar day and a UTC calendar
month), the id and bounds of the period an instant falls in, the ledger
fields of a scope (the org, its squad, its key), and the shapes of a scope's
`budget` and `strategy` settings. No clock: the instant is
passed in, epoch seconds.
Must not import: anything outside the standard library, msgspec and
`turnout.core`.
"""

from __future__ import annotations

import math
import sys
from datetime import UTC, datetime
from typing import Annotated, Final, Literal

import msgspec

Period = Literal["day", "month"]
PERIODS: Final[tuple[Period, ...]] = ("day", "month")

Usd = Annotated[float, msgspec.Meta(gt=0, le=sys.float_info.max)]
"""An amount above 0 and finite: JSON has no infinity (YAML's `.inf` would be stored as `null`)."""
Percent = Annotated[float, msgspec.Meta(ge=0, le=1000)]
RuleName = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]


class Budget(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An amount a scope may spend per period (a scope's `budget` setting).

    Attributes:
        usd: the amount, USD.
        period: `day` or `month`, UTC.
        hard: True: once spent, requests are answered 429 `budget_exceeded`
            until the period resets; False (soft): only the strategy's rules
            act on it.
    """

    usd: Usd
    period: Period = "month"
    hard: bool = False


class StrategyRule(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One rule of a strategy: past `at_percent` of the budget, serve `model`.

    Attributes:
        name: what the answer's `x-turnout-strategy` header and the records say.
        at_percent: share of the budget spent from which the rule fires.
        model: the catalog model served instead of the requested one.
        fallback: the only model tried when `model` fails (None: none).
    """

    name: RuleName
    at_percent: Percent
    model: str
    fallback: str | None = None


ORG_FIELD: Final = "org"
SQUAD_PREFIX: Final = "squad:"
KEY_PREFIX: Final = "key:"


def _moment(at_s: float) -> datetime:
    """`at_s` as a UTC datetime, floored to the second (periods start on whole
    seconds; `fromtimestamp` alone would round 23:59:59.9999995 up into the
    next period)."""
    return datetime.fromtimestamp(math.floor(at_s), UTC)


def period_id(period: Period, at_s: float) -> str:
    """The UTC period `at_s` (epoch seconds) falls in: `2026-12-01` for a day, `2026-12` for a month."""
    moment = _moment(at_s)
    return moment.strftime("%Y-%m-%d") if period == "day" else moment.strftime("%Y-%m")


def period_bounds(period: Period, at_s: float) -> tuple[float, float]:
    """(start, end) of the UTC period `at_s` falls in, epoch seconds; start <= at_s < end.

    The end is the reset time a budget on this period reports (SPEC §10).
    """
    moment = _moment(at_s)
    if period == "day":
        start = moment.replace(hour=0, minute=0, second=0, microsecond=0)
        return start.timestamp(), start.timestamp() + 86_400.0
    start = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    following = (
        start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    )
    return start.timestamp(), following.timestamp()


def scope_fields(squad: str | None, key: str) -> tuple[str, ...]:
    """The ledger fields one request's spend adds to: the org's total, its
    squad's (when the key has one) and its key's (by name)."""
    return (ORG_FIELD, *((SQUAD_PREFIX + squad,) if squad else ()), KEY_PREFIX + key)
