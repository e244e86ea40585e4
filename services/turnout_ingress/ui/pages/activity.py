"""The Activity page: `GET /ui/activity`, the requests newest first, filtered, paged and live."""

from __future__ import annotations

import time
from typing import Any

import msgspec
from fastapi import APIRouter, Request
from starlette.datastructures import QueryParams
from starlette.responses import Response

from turnout_ingress.admin.access import Caller
from turnout_ingress.admin.records import MEDIA_TYPES
from turnout_ingress.ui import glance, query, reader, series
from turnout_ingress.ui.activity import OUTCOMES, Filters, valid_cursor
from turnout_ingress.ui.deps import Board, PageRoute, Viewer
from turnout_ingress.ui.render import page

router = APIRouter(route_class=PageRoute, include_in_schema=False)

PAGE_SIZE = 50
FILTERS = ("org", "squad", "key", "model", "provider", "outcome", "since", "until", "last", "window")
"""The query parameters the page's links carry over."""


@router.get("/ui/activity")
async def activity(request: Request, caller: Viewer, board: Board) -> Response:
    """The page of requests the query's filters select (an org's admin: its org only), from the
    query's `cursor` (none: the newest, and the page refreshes live); `fragment`: the rows only.
    The whole page starts with the header's live figures and the charts of the query's `window`
    (`series.WINDOWS`; of the viewer's scope, the filters aside: `glance`), which refresh live
    too (`fragment=glance`: those only)."""
    q = request.query_params
    if q.get("fragment") == "glance":
        params = {k: q.get(k) for k in FILTERS}
        return page("glance.html", caller, **await _at_glance(q, caller, board), params=params)
    filters, error = await _filters(q, caller, board)
    cursor = valid_cursor(q.get("cursor"))
    skip = frozenset(s for s in (q.get("skip") or "").split(",") if s)
    started = time.perf_counter()
    result = await reader.read_page(
        board.state.redis,
        scope_org=caller.org,
        filters=filters,
        cursor=cursor,
        skip=skip,
        size=query.bounded_int(q.get("size"), PAGE_SIZE, 1, 200),
    )
    read_ms = (time.perf_counter() - started) * 1000.0
    params = {k: q.get(k) for k in FILTERS}
    if caller.org is not None:
        params["org"] = None
    older = None
    if result.cursor is not None:
        older = {**params, "cursor": result.cursor, "skip": ",".join(result.skip)}
    at_glance: dict[str, Any] = {}
    name = "activity_rows.html"
    if not q.get("fragment"):
        at_glance = await _at_glance(q, caller, board)
        name = "activity.html"
    return page(
        name,
        caller,
        **at_glance,
        page=result,
        params=params,
        older=older,
        live=cursor is None,
        error=error,
        read_ms=read_ms,
        outcomes=OUTCOMES,
        export_formats=tuple(MEDIA_TYPES),
    )


async def _at_glance(q: QueryParams, caller: Caller, board: Board) -> dict[str, Any]:
    """The header's figures and the charts of the query's `window` for `caller` (`glance`).

    Raises:
        StateUnavailable: Redis unreachable (the page's 503).
    """
    window = await glance.read_window(board, caller, q.get("window"))
    return glance.activity_charts(window) | {
        "window": window,
        "windows": tuple(series.WINDOWS),
        "spend_today": await glance.spend_today(board, caller, window.now_s),
        "live_min": int(glance.LIVE_S // 60),
    }


async def _filters(q: QueryParams, caller: Caller, board: Board) -> tuple[Filters, str | None]:
    """The filters of query `q` for `caller`, and the message about a bad one (None: all good).

    An org's rows start at that org's creation: none of a deleted org of the same id.

    Raises:
        StateUnavailable: the org's document cannot be read (the page's 503).
    """
    since_s, until_s, error = query.times(q)
    last_min, last_error = query.last_minutes(q.get("last"))
    outcome, outcome_error = query.outcome(q.get("outcome"))
    if last_min and since_s is None:
        since_s = time.time() - last_min * 60
    filters = Filters(
        org=caller.org or q.get("org") or None,
        squad=q.get("squad") or None,
        key=q.get("key") or None,
        model=q.get("model") or None,
        provider=q.get("provider") or None,
        outcome=outcome,
        since_s=since_s,
        until_s=until_s,
    )
    if filters.org is not None:
        doc, _ = await board.access.store.load(filters.org)
        born_s = doc.created_s if doc is not None else 0.0
        if born_s and (filters.since_s is None or filters.since_s < born_s):
            filters = msgspec.structs.replace(filters, since_s=born_s)
    return filters, error or last_error or outcome_error
