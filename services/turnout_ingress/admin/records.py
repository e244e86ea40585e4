"""Admin route of attempt records: the export (SPEC §9).

Owns: `GET /admin/v1/logs/export?org=…&format=jsonl|csv&since=…&until=…`.
An org's admin key exports its own org's rows and only those (`org` may be
left out; another org's id answers 404, as a missing org does); the
operator key exports the org `org` names (required: 400 without it, 404 for
an org that does not exist), as the dashboard's export does. Rows are
streamed page by page from the records stream (never held in memory whole).
`since` / `until` are ISO-8601 (`2025-06-01T12:00:00Z`; no zone means UTC)
or epoch seconds, both inclusive (`time_query.parse_range`: `since` later
than `until` is a 400). Every query-parameter error is a 400 `invalid_value`
naming the parameter.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from redis.asyncio import Redis
from starlette.responses import Response, StreamingResponse

from turnout.errors import GatewayUnavailable, RequestRejected
from turnout.observability.records_export import attempts, csv_header, csv_lines, jsonl_lines, read_rows
from turnout.state.errors import StateUnavailable
from turnout.stored.orgs import OrgDoc
from turnout.tenancy.admin import not_found
from turnout_ingress.admin.access import AdminAPI, Caller, rejected
from turnout_ingress.admin.deps import Admin
from turnout_ingress.admin.quote import quoted
from turnout_ingress.admin.time_query import INVALID_VALUE, parse_range, refuse_unknown

MEDIA_TYPES = {"jsonl": "application/x-ndjson", "csv": "text/csv; charset=utf-8"}
ORG_SHOWN_CHARS = 64
"""Characters of an unknown org id quoted in its 404 (an org id's most)."""
PAGE_SIZE = 500
"""Stream entries read per XRANGE call."""

router = APIRouter()


async def export_response(
    redis: Redis,
    org: str,
    fmt: str,
    since_s: float | None,
    until_s: float | None,
    now_s: float | None = None,
    *,
    born_s: float,
) -> StreamingResponse:
    """One org's records with `since_s <= ts <= until_s` (epoch s; None: open) as a JSONL or CSV download,
    none older than `born_s` (the org's `created_s`: a deleted org of the same id left the older ones),
    one row per attempt (`turnout.observability.records_export.attempts`: an attempt without an end is `in_flight`, or `lost`
    once past its deadline at `now_s`, epoch s, default now).

    Args:
        fmt: `jsonl` or `csv` (a key of `MEDIA_TYPES`).

    Raises:
        GatewayUnavailable: 503 when Redis is unreachable at the start.
    """
    now_s = time.time() if now_s is None else now_s
    since_s = max(since_s, born_s) if since_s is not None else (born_s or None)
    rows = attempts(read_rows(redis, org=org, since_s=since_s, until_s=until_s, page_size=PAGE_SIZE), now_s)
    try:
        first = await anext(rows, None)
    except StateUnavailable as exc:
        raise GatewayUnavailable(
            "The attempt records are unreachable right now; retry shortly.",
            retry_after_s=1,
            code="redis_unavailable",
        ) from exc
    render = csv_lines if fmt == "csv" else jsonl_lines

    async def body() -> AsyncIterator[bytes]:
        if fmt == "csv":
            yield csv_header()
        if first is None:
            return
        page: list[dict[str, Any]] = [first]
        async for row in rows:
            page.append(row)
            if len(page) >= PAGE_SIZE:
                yield render(page)
                page = []
        if page:
            yield render(page)

    filename = f"turnout-records-{org}.{fmt}"
    return StreamingResponse(
        body(), media_type=MEDIA_TYPES[fmt], headers={"content-disposition": f'attachment; filename="{filename}"'}
    )


def export_org(caller: Caller, asked: str | None, route: str = "/admin/v1/logs/export") -> str:
    """The org whose rows `caller` may read, given the query's `org` (`asked`; None or "" when absent).

    An org admin reads its own org: `asked` may be left out, and another
    org's id is refused exactly as an org that does not exist (tenant
    isolation, README "Admin API"). The operator names the org (the
    dashboard's export asks the same); whether that org exists is the
    caller's to check. `route` is the path the 400 shows.

    Raises:
        RequestRejected: 400 `invalid_value` (param `org`) for the operator
            without `org`; 404 `not_found` for an org admin naming another org.
    """
    if caller.org is not None:
        if asked and asked != caller.org:
            raise rejected(not_found())
        return caller.org
    if not asked:
        raise RequestRejected(
            400,
            f"`org` is required with the operator key: name the org whose rows to read (`{route}?org=<org>`).",
            param="org",
            code=INVALID_VALUE,
        )
    return asked


async def queried_org(request: Request, api: AdminAPI, caller: Caller, route: str) -> tuple[str, OrgDoc]:
    """The org of the query's `org` that `caller` may read (`export_org`) and its document.

    Raises:
        RequestRejected: 400 as `export_org`; 404 `not_found` (param `org`, naming it) for an org
            the caller may not see or that does not exist (the two answer alike).
        GatewayUnavailable: 503 when the tenancy store is unreachable.
    """
    asked = request.query_params.get("org")
    try:
        org = export_org(caller, asked, route)
        doc = await api.read(request, org)  # 404 for an org that does not exist, as every admin route answers
    except RequestRejected as exc:
        if exc.code != "not_found":
            raise
        # the org is in the query, not the path: say which (the caller's own words; another org's
        # and a missing one still answer alike)
        raise RequestRejected(
            404, f"No such org {quoted(asked, ORG_SHOWN_CHARS)}", error_type=exc.error_type, code=exc.code, param="org"
        ) from None
    return org, doc


def ingress_redis(request: Request) -> Redis:
    """The ingress's Redis client."""
    redis: Redis = request.app.state.turnout.redis
    return redis


@router.get("/admin/v1/logs/export")
async def export_logs(request: Request, api: Admin, redis: Annotated[Redis, Depends(ingress_redis)]) -> Response:
    """One org's attempt records as a JSONL or CSV download: an org admin's own org, or the operator's
    `org` (`export_org`; 401 unknown key, 403 not an admin key, 404 an org the caller may not see or
    that does not exist)."""
    caller = api.caller(request)
    refuse_unknown(request.query_params, ("org", "format", "since", "until"))
    org, doc = await queried_org(request, api, caller, "/admin/v1/logs/export")
    fmt = request.query_params.get("format", "jsonl")
    if fmt not in MEDIA_TYPES:
        raise RequestRejected(400, "`format` must be `jsonl` or `csv`.", param="format", code=INVALID_VALUE)
    since_s, until_s = parse_range(request.query_params)
    return await export_response(redis, org, fmt, since_s, until_s, born_s=doc.created_s)
