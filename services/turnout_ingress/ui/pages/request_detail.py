"""The request page: `GET /ui/requests/{request_id}`, one request's attempts."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Request
from starlette.responses import Response

from turnout_ingress.ui import reader
from turnout_ingress.ui.activity import valid_cursor
from turnout_ingress.ui.deps import Board, PageRoute, Viewer
from turnout_ingress.ui.render import page

router = APIRouter(route_class=PageRoute, include_in_schema=False)


@router.get("/ui/requests/{request_id}")
async def request_detail(request: Request, caller: Viewer, board: Board) -> Response:
    """The attempts of the request `request_id` (1-64 letters and digits) that `caller` may see,
    found near the query's `at` cursor when given; 404 for any other id. With a trace URL set
    (`TURNOUT_UI_TRACE_URL`), the page links to the request's trace."""
    request_id = request.path_params["request_id"]
    if not (0 < len(request_id) <= 64 and request_id.isalnum()):
        return page("error.html", caller, status=404, message="No such request.")
    found = await reader.find_request(
        board.state.redis,
        request_id,
        scope_org=caller.org,
        at=valid_cursor(request.query_params.get("at")),
    )
    if found is None:
        return page("error.html", caller, status=404, message="No such request.")
    trace_url = board.trace_url
    trace = trace_url.replace("{request_id}", quote(request_id)) if trace_url else None
    return page("request.html", caller, req=found, trace=trace)
