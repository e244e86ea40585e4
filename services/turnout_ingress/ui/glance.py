"""The at-a-glance parts of the pages: what they read, and the charts drawn from it.

Owns: reading a chart window's attempt rows (`reader.window_rows`) and breaker transitions
(`turnout.state.transitions_stream`) for a viewer's scope, and building Activity's header
figures and charts, Providers' per-target timelines and Spend's daily bars from them
(`series`, `timeline`, `charts`: pure).
Must not import: the UI's routes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import msgspec

from turnout.state import transitions_stream
from turnout_ingress.admin.access import Caller
from turnout_ingress.ui import charts, reader, series, timeline
from turnout_ingress.ui.deps import Dashboard
from turnout_ingress.ui.figures import LedgerRow, Row
from turnout_ingress.ui.series import Window

SCAN_MAX = 100_000
"""Attempt records a chart window reads at most (the page says when it stopped there)."""
CACHE_S = 5.0
"""A window's rows serve the pages of one scope this many seconds."""
LIVE_S = 300.0
"""The header's live figures cover the last this many seconds."""
HISTORY_S = 3600.0
"""Transitions are read from this long before a window (the state at its start)."""
DAYS = 7
"""Days in Spend's daily chart."""


async def read_window(board: Dashboard, caller: Caller, name: str | None, now_s: float | None = None) -> Window:
    """The attempt rows of `caller`'s scope over the window `name` (`series.WINDOWS`) and the live span,
    read at most once per `CACHE_S` per scope and window (`Dashboard.glance_cache`).

    Raises:
        StateUnavailable: Redis unreachable.
    """
    now_s = time.time() if now_s is None else now_s
    name, span_s = series.window_s(name)
    cached = board.glance_cache.get((caller.org, name))
    if cached is not None and 0 <= now_s - cached.now_s < CACHE_S:
        return cached
    rows, partial = await reader.window_rows(
        board.state.redis, scope_org=caller.org, since_s=now_s - max(span_s, LIVE_S), scan_max=SCAN_MAX
    )
    window = Window(name=name, span_s=span_s, now_s=now_s, rows=rows, partial=partial)
    board.glance_cache[(caller.org, name)] = window
    return window


async def spend_today(board: Dashboard, caller: Caller, now_s: float) -> float:
    """USD spent today (UTC) by `caller`'s scope, from the spend ledger (the operator: every org).

    Raises:
        StateUnavailable: Redis unreachable.
    """
    orgs = sorted(await board.access.store.org_versions()) if caller.operator else [caller.org or ""]
    total = 0.0
    for org in orgs:
        total += float((await board.state.obs.spend.read(org, "day", now_s)).get("total_usd", 0.0))
    return total


def activity_charts(w: Window) -> dict[str, Any]:
    """Activity's header figures (`series.Glance`) and its two charts (SVG strings) over `w`."""
    reqs = series.requests(w.rows)
    b = series.buckets(w.rows, w.now_s, w.span_s, reqs=reqs)
    return {
        "glance": series.glance(reqs, w.now_s, LIVE_S),
        "outcomes_svg": charts.stacked_bars(
            "chart-outcomes",
            "Requests by outcome",
            b.start_s,
            b.step_s,
            [(o, b.outcomes[o]) for o in series.OUTCOMES],
        ),
        "latency_svg": charts.lines(
            "chart-latency",
            "Request latency",
            b.start_s,
            b.step_s,
            [("p50", b.p50_ms), ("p95", b.p95_ms)],
        ),
    }


async def provider_lanes(
    board: Dashboard, caller: Caller, w: Window, targets: Sequence[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per target of `targets`, its timeline lane over `w` (`{target, svg, moved}`), and the
    window's transitions as table rows (newest first). An org's admin sees no error text.

    Raises:
        StateUnavailable: Redis unreachable.
    """
    start_s = w.now_s - w.span_s
    raw = await transitions_stream.read_since(board.state.redis, start_s - HISTORY_S - reader.CLOCK_SLACK_S)
    events = [e for e in timeline.decode(raw) if e.target in targets]
    if caller.org is not None:
        events = [msgspec.structs.replace(e, error="") for e in events]
    per_target = timeline.by_target(events)
    b = series.buckets(w.rows, w.now_s, w.span_s)
    went = series.moved(w.rows)
    lanes = []
    for i, target in enumerate(targets):
        mine = per_target.get(target, [])
        moved = went.get(target, [])
        words = "Its traffic went to " + ", ".join(f"{t} ({n})" for t, n in moved) + "." if moved else ""
        svg = charts.lane(
            f"lane-{i}",
            target,
            start_s,
            w.now_s,
            timeline.segments(mine, start_s, w.now_s),
            b.share.get(target, []),
            mine,
            moved=words,
        )
        lanes.append({"target": target, "svg": svg, "moved": words})
    shown = [e for e in events if e.ts >= start_s]
    return lanes, timeline.as_rows(shown)


def daily(rows: Sequence[Row], now_s: float, days: int = DAYS) -> list[tuple[str, float]]:
    """USD per UTC day of `rows` (attempt rows), the last `days` days ending today, oldest first."""
    today = int(now_s // 86_400)
    sums = dict.fromkeys(range(today - days + 1, today + 1), 0.0)
    for r in rows:
        day = int(r.ts // 86_400)
        if day in sums:
            sums[day] += r.cost_usd or 0.0
    return [(time.strftime("%a %d %b", time.gmtime(d * 86_400)), round(v, 6)) for d, v in sums.items()]


def daily_svg(days: Sequence[tuple[str, float]], daily_budget_usd: float | None) -> str:
    """Spend's bar chart of `days` ((label, USD)); a day over `daily_budget_usd` (None: none) is flagged."""
    items = [(label, usd, daily_budget_usd is not None and usd > daily_budget_usd) for label, usd in days]
    return charts.bars("chart-spend", "Spend per day (UTC, from the attempt records)", items)


def org_day_budget(ledger: Sequence[LedgerRow]) -> float | None:
    """The USD of the org's own daily budget among an org's ledger rows (`figures.ledger_rows`), or None."""
    return next((r.budget.usd for r in ledger if r.level == "org" and r.budget and r.budget.period == "day"), None)
