"""The export: `GET /ui/export?format=jsonl|csv&org=…&since=…&until=…`, an org's records as a file."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from turnout_ingress.admin.quote import quoted
from turnout_ingress.admin.records import MEDIA_TYPES, export_response
from turnout_ingress.ui import query
from turnout_ingress.ui.deps import Board, PageRoute, Viewer
from turnout_ingress.ui.render import page

router = APIRouter(route_class=PageRoute, include_in_schema=False)


@router.get("/ui/export")
async def export(request: Request, caller: Viewer, board: Board) -> Response:
    """The records of an org (an org's admin: its own; the operator: the query's `org`) in the
    query's `format`, between `since` and `until`, as the admin API's export answers them; a
    missing format or org, or a bad time, is a 400 page, an unknown org a 404 page."""
    q = request.query_params
    fmt = q.get("format", "jsonl")
    org = caller.org or q.get("org") or ""
    if fmt not in MEDIA_TYPES or not org:
        return page(
            "error.html",
            caller,
            status=400,
            message="Choose a format (jsonl or csv)" + ("" if org else " and an org") + " to export.",
        )
    since_s, until_s, error = query.times(q)
    if error is not None:
        return page("error.html", caller, status=400, message=error)
    doc, _ = await board.access.store.load(org)  # unreachable: the page's 503 (`PageRoute`)
    if doc is None:  # the operator's pick (an org's admin exports its own org)
        return page("error.html", caller, status=404, message=f"No such org {quoted(org, 64)}.")
    return await export_response(board.state.redis, org, fmt, since_s, until_s, born_s=doc.created_s)
