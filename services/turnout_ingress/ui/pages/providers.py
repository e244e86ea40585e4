"""The Providers page: `GET /ui/providers`, each target's breaker state, health and traffic, live."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from turnout_ingress.ops_routes import provider_rows
from turnout_ingress.ui import figures, glance, reader, samples, series
from turnout_ingress.ui.deps import Board, PageRoute, Viewer
from turnout_ingress.ui.render import page

router = APIRouter(route_class=PageRoute, include_in_schema=False)

TRAFFIC_WINDOW_S = 300.0
"""Providers: calls per minute and error classes over the last 5 minutes of records."""
TRAFFIC_SCAN_MAX = 50_000


@router.get("/ui/providers")
async def providers(request: Request, caller: Viewer, board: Board) -> Response:
    """The rows `GET /v1/health/providers` shows `caller` (`ops_routes.provider_rows`), each with
    its health-score sparkline (this read adds a sample) and its traffic over `TRAFFIC_WINDOW_S`;
    `fragment`: the rows only. The whole page adds each target's timeline over the query's
    `window` (`series.WINDOWS`): breaker states, traffic share, transitions (`glance.provider_lanes`)."""
    state = board.state
    rows, degraded, now_s = await provider_rows(state, caller.org)
    targets = [r["target"] for r in rows]
    await samples.sample(state.redis, [(r["target"], r["score"]) for r in rows], now_s)
    rings = await samples.read(state.redis, targets)
    recent, partial = await reader.window_rows(
        state.redis,
        scope_org=caller.org,
        since_s=now_s - TRAFFIC_WINDOW_S,
        scan_max=TRAFFIC_SCAN_MAX,
    )
    traffic = figures.traffic(recent, TRAFFIC_WINDOW_S)
    lines = {t: samples.sparkline(rings.get(t, [])) for t in targets}
    at_glance: dict[str, Any] = {}
    if request.query_params.get("fragment"):
        name = "providers_rows.html"
    else:
        name = "providers.html"
        window = await glance.read_window(board, caller, request.query_params.get("window"), now_s)
        lanes, transitions = await glance.provider_lanes(board, caller, window, targets)
        at_glance = {"window": window, "windows": tuple(series.WINDOWS), "lanes": lanes, "transitions": transitions}
    return page(
        name,
        caller,
        **at_glance,
        rows=rows,
        degraded=degraded,
        lines=lines,
        traffic=traffic,
        partial=partial,
        window_min=int(TRAFFIC_WINDOW_S // 60),
    )
