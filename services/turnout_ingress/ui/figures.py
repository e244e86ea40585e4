"""Figures the Providers and Spend pages compute from attempt rows.

Owns: calls per minute and recent error classes per target, and cost per
period per org / squad / key — pure functions over `turnout.observability.records` rows —
and the spend ledger's day and month read as table rows.
Must not import: FastAPI, Redis.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from turnout.core.spend import Budget
from turnout.stored.orgs import OrgDoc


class Row(msgspec.Struct, frozen=True, kw_only=True):
    """The fields of an attempt record these figures read (decoding only these is about 3x faster)."""

    ts: float = 0.0
    org: str = ""
    squad: str | None = None
    key: str = ""
    provider: str = ""
    served_model: str = ""
    kind: str = ""
    klass: str | None = msgspec.field(default="", name="class")
    status: int | None = None
    cost_usd: float | None = 0.0
    phase: str = "ended"
    request_id: str = ""
    attempt: int = 0
    run: int | None = 1
    latency_ms: float | None = 0.0
    ttft_ms: float | None = None
    is_fallback: bool = False


PERIODS = (("Last hour", 3600.0), ("Last 24 h", 86_400.0), ("Last 7 days", 604_800.0))
"""Spend periods: label and length in seconds, shortest first."""


class TargetTraffic(msgspec.Struct, frozen=True, kw_only=True):
    """A target's recent traffic from the records.

    Attributes:
        calls_per_min: attempts per minute over the window.
        errors: failed attempts by `class status` (e.g. `retryable 503`), most frequent first.
    """

    calls_per_min: float
    errors: tuple[tuple[str, int], ...]


def traffic(rows: Iterable[Row], window_s: float) -> dict[str, TargetTraffic]:
    """Per target `provider/model`: calls per minute over `window_s` seconds (> 0) and failed attempts by class.

    Error labels are the record's class and status only: never a message.
    """
    calls: Counter[str] = Counter()
    errors: dict[str, Counter[str]] = {}
    for r in rows:
        target = f"{r.provider}/{r.served_model}"
        calls[target] += 1
        if r.kind != "success":
            label = (r.klass or r.kind) + (f" {r.status}" if r.status else "")
            errors.setdefault(target, Counter())[label] += 1
    minutes = window_s / 60.0
    return {
        target: TargetTraffic(
            calls_per_min=round(n / minutes, 2),
            errors=tuple(errors.get(target, Counter()).most_common(4)),
        )
        for target, n in calls.items()
    }


class SpendRow(msgspec.Struct, frozen=True, kw_only=True):
    """Cost of one scope: `scope` is `org`, `org / squad` or `org / squad / key`; `usd` per period, PERIODS order."""

    level: str
    scope: str
    usd: tuple[float, ...]
    requests: int


class SpendTable(msgspec.Struct, frozen=True, kw_only=True):
    """The cost table of one scope, as computed from the records (the Spend page keeps it `SPEND_CACHE_S`).

    Attributes:
        table: the rows (`spend`).
        days: USD per UTC day, the last 7 days, oldest first (`glance.daily`).
        partial: the scan stopped at its bound of records.
        records: how many records it read.
        as_of_s: when (epoch s).
        read_ms: how long the read took (ms).
        made_monotonic_s: when, on the monotonic clock (s), for the cache's age.
    """

    table: list[SpendRow]
    partial: bool
    records: int
    as_of_s: float
    read_ms: float
    made_monotonic_s: float
    days: list[tuple[str, float]] = []


def spend(rows: Iterable[Row], now_s: float, periods: Sequence[tuple[str, float]] = PERIODS) -> list[SpendRow]:
    """Cost (USD) per org, squad and key over each period ending at `now_s` (epoch s).

    `requests` counts successful attempts in the longest period. Rows are
    sorted by org, then squad, then key; a key without a squad sits under
    `org / -`.
    """
    usd: dict[tuple[str, str], list[float]] = {}
    served: Counter[tuple[str, str]] = Counter()
    for r in rows:
        age_s = now_s - r.ts
        org, squad, key, cost, ok = r.org, r.squad or "-", r.key, r.cost_usd or 0.0, r.kind == "success"
        for level, scope in (("org", org), ("squad", f"{org} / {squad}"), ("key", f"{org} / {squad} / {key}")):
            sums = usd.setdefault((level, scope), [0.0] * len(periods))
            for i, (_, length_s) in enumerate(periods):
                if age_s <= length_s:
                    sums[i] += cost
            if ok and age_s <= periods[-1][1]:
                served[(level, scope)] += 1
    return [
        SpendRow(level=level, scope=scope, usd=tuple(round(v, 6) for v in sums), requests=served[(level, scope)])
        for (level, scope), sums in sorted(usd.items(), key=lambda item: item[0][1])
    ]


class LedgerRow(msgspec.Struct, frozen=True, kw_only=True):
    """One scope of the spend ledger (SPEC §10): USD today and this month (UTC periods),
    and the budget the scope sets, if any.

    Attributes:
        budget: the scope's own `budget` setting (it counts this scope's
            spend), or None.
        used: the share of that budget spent in its period (1.0 = spent).
    """

    level: str
    scope: str
    day_usd: float
    month_usd: float
    budget: Budget | None = None
    used: float | None = None


def ledger_rows(
    day: Mapping[str, Any],
    month: Mapping[str, Any],
    budgets: Mapping[tuple[str, str], Budget] | None = None,
) -> list[LedgerRow]:
    """The org, then its squads, then its keys, from two `SpendLedger.read` answers of one org.

    Args:
        day / month: the ledger of the org for today and this month.
        budgets: (level, name) -> the budget that scope sets (`("org", "")`
            for the org); scopes with a budget and no spend are listed too.

    A scope with spend this month but none today shows 0 for today.
    """
    budgets = budgets or {}
    org = str(month.get("org") or day.get("org") or "")

    def row(level: str, name: str, scope: str, day_usd: float, month_usd: float) -> LedgerRow:
        budget = budgets.get((level, name))
        spent = day_usd if budget is not None and budget.period == "day" else month_usd
        used = spent / budget.usd if budget is not None and budget.usd > 0 else None
        return LedgerRow(level=level, scope=scope, day_usd=day_usd, month_usd=month_usd, budget=budget, used=used)

    rows = [row("org", "", org, float(day.get("total_usd", 0.0)), float(month.get("total_usd", 0.0)))]
    for level, field in (("squad", "squads"), ("key", "keys")):
        names = sorted(set(day.get(field, {})) | set(month.get(field, {})) | {n for lv, n in budgets if lv == level})
        rows.extend(
            row(
                level,
                name,
                f"{org} / {level} {name}",
                float(day.get(field, {}).get(name, 0.0)),
                float(month.get(field, {}).get(name, 0.0)),
            )
            for name in names
        )
    return rows


def scope_budgets(doc: OrgDoc | None) -> dict[tuple[str, str], Budget]:
    """(level, name) -> the budget each scope of `doc` sets itself (`("org", "")` for the org)."""
    if doc is None:
        return {}
    out: dict[tuple[str, str], Budget] = {}
    scopes = [
        ("org", "", doc.settings),
        *(("squad", n, s.settings) for n, s in doc.squads.items()),
        *(("key", n, k.settings) for n, k in doc.keys.items()),
    ]
    for level, name, settings in scopes:
        if isinstance(settings.budget, Budget):
            out[(level, name)] = settings.budget
    return out
