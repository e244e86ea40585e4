"""The Spend page: `GET /ui/spend`, cost per period from the attempt records, and the spend ledger."""

from __future__ import annotations

import time

from fastapi import APIRouter
from starlette.responses import Response

from turnout_ingress.admin.access import Caller
from turnout_ingress.ui import figures, glance, reader
from turnout_ingress.ui.deps import Board, PageRoute, Viewer
from turnout_ingress.ui.render import page

router = APIRouter(route_class=PageRoute, include_in_schema=False)

SPEND_SCAN_MAX = 200_000
SPEND_CACHE_S = 30.0
"""Spend is computed at most once per this many seconds per scope (org, or the operator's all)."""


@router.get("/ui/spend")
async def spend(caller: Viewer, board: Board) -> Response:
    """Cost per period of `caller`'s scope (cached `SPEND_CACHE_S`), and the spend ledger of
    each org it sees (the operator: every org) with its budgets, a scope over its budget flagged,
    and a bar chart of the spend per day (an org admin's days over the org's daily budget flagged)."""
    cached = board.spend_cache.get(caller.org)
    if cached is None or time.monotonic() - cached.made_monotonic_s > SPEND_CACHE_S:
        cached = await _spend_table(board, caller)
        board.spend_cache[caller.org] = cached
    orgs = sorted(await board.access.store.org_versions()) if caller.operator else [caller.org or ""]
    docs = await board.access.store.load_many(orgs)
    ledger = [
        figures.ledger_rows(
            await board.state.obs.spend.read(org, "day", time.time()),
            await board.state.obs.spend.read(org, "month", time.time()),
            figures.scope_budgets(docs[org][0] if org in docs else None),
        )
        for org in orgs
    ]
    day_budget = glance.org_day_budget(ledger[0]) if caller.org is not None and ledger else None
    return page(
        "spend.html",
        caller,
        daily_svg=glance.daily_svg(cached.days, day_budget),
        spend=cached,
        periods=[p[0] for p in figures.PERIODS],
        cache_s=int(SPEND_CACHE_S),
        ledger=[row for rows in ledger for row in rows],
    )


async def _spend_table(board: Board, caller: Caller) -> figures.SpendTable:
    """The cost table of `caller`'s scope, read from the records of the longest period."""
    now_s = time.time()
    started = time.perf_counter()
    rows, partial = await reader.window_rows(
        board.state.redis,
        scope_org=caller.org,
        since_s=now_s - figures.PERIODS[-1][1],
        scan_max=SPEND_SCAN_MAX,
    )
    return figures.SpendTable(
        table=figures.spend(rows, now_s),
        partial=partial,
        records=len(rows),
        as_of_s=now_s,
        read_ms=(time.perf_counter() - started) * 1000.0,
        made_monotonic_s=time.monotonic(),
        days=glance.daily(rows, now_s),
    )
