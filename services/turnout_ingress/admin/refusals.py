"""Admin route of the door refusals' rows (README "Door refusals").

Owns: `GET /admin/v1/refusals?org=…&since=…&until=…&route=…&status=…&code=…&limit=…`,
the stored rows of requests refused at the door (`turnout_ingress.guard.door.RefusalRow`),
newest first, as JSON `{"object": "list", "org", "data": [row, ...], "has_more"}`.
Who reads what, as the records export (`records.queried_org`): an org's admin key
reads its own org's rows only (`org` may be left out; another org's id, and `-`, answer
404 as an org that does not exist); the operator key names the org (400 without
`org`, 404 for an org that does not exist), or `org=-` for the callers not identified
(401s, unknown paths before any key). `since` / `until` as the other admin exports
(`time_query.parse_range`); `route` one of the route labels (`door.ROUTE_LABELS`),
`status` an HTTP status 400-599, `code` an error code, `limit` 1 to `MAX_LIMIT`
(default `DEFAULT_LIMIT`). A bad parameter is a 400 `invalid_value` naming it; Redis
unreachable, a 503 with Retry-After.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Annotated, NamedTuple

import msgspec
from fastapi import APIRouter, Depends, Request
from redis.asyncio import Redis
from starlette.responses import Response

from turnout.errors import GatewayUnavailable, RequestRejected
from turnout.state import refusals_stream
from turnout.state.errors import StateUnavailable
from turnout_ingress.admin.access import ok
from turnout_ingress.admin.deps import Admin
from turnout_ingress.admin.quote import quoted
from turnout_ingress.admin.records import ingress_redis, queried_org
from turnout_ingress.admin.time_query import INVALID_VALUE, SHOWN_CHARS, parse_range, refuse_unknown
from turnout_ingress.guard.door import CODE_PATTERN, ROUTE_LABELS, RefusalRow

PATH = "/admin/v1/refusals"
UNIDENTIFIED = "-"
"""The `org` naming the stream of callers not identified (operator only)."""
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
"""Most rows one answer holds."""
KNOWN = ("org", "since", "until", "route", "status", "code", "limit")

router = APIRouter()
_decode = msgspec.json.Decoder(RefusalRow)


class RefusalQuery(NamedTuple):
    """The filters of one read; None: not filtered on. Times in epoch seconds, both inclusive."""

    since_s: float | None
    until_s: float | None
    route: str | None
    status: int | None
    code: str | None
    limit: int


def _invalid(message: str, param: str) -> RequestRejected:
    return RequestRejected(400, message, param=param, code=INVALID_VALUE)


def _integer(query: Mapping[str, str], name: str, low: int, high: int, default: int | None) -> int | None:
    """The query's `name` as an integer in `low..high` (`default` when absent; 400 naming it otherwise)."""
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    if not (raw.isascii() and raw.isdigit() and low <= int(raw) <= high):
        raise _invalid(f"`{name}` must be an integer from {low} to {high}, not {quoted(raw, SHOWN_CHARS)}.", name)
    return int(raw)


def parse_query(query: Mapping[str, str]) -> RefusalQuery:
    """The filters of `query` (module doc).

    Raises:
        RequestRejected: 400 `invalid_value` naming the first bad parameter.
    """
    since_s, until_s = parse_range(query)
    route = query.get("route") or None
    if route is not None and route not in ROUTE_LABELS:
        raise _invalid(
            f"`route` must be a route label (a served route's path such as `/v1/chat/completions`, an API family "
            f'such as `/v1/images`, `admin` or `other`; README "Door refusals"), not {quoted(route, SHOWN_CHARS)}.',
            "route",
        )
    code = query.get("code") or None
    if code is not None and not CODE_PATTERN.fullmatch(code):
        raise _invalid(
            f"`code` must be an error code (`rate_limit_exceeded`), not {quoted(code, SHOWN_CHARS)}.", "code"
        )
    limit = _integer(query, "limit", 1, MAX_LIMIT, DEFAULT_LIMIT)
    assert limit is not None
    return RefusalQuery(since_s, until_s, route, _integer(query, "status", 400, 599, None), code, limit)


def matches(row: RefusalRow, query: RefusalQuery) -> bool:
    """True when `row` passes every filter of `query`."""
    return (
        (query.since_s is None or row.ts >= query.since_s)
        and (query.until_s is None or row.ts <= query.until_s)
        and (query.route is None or row.route == query.route)
        and (query.status is None or row.status == query.status)
        and (query.code is None or row.code == query.code)
    )


async def newest(rows: AsyncIterator[bytes], query: RefusalQuery) -> tuple[list[RefusalRow], bool]:
    """The first `query.limit` rows of `rows` (encoded, newest first) that match `query`, and whether
    more matched. A row that does not decode is skipped.

    Raises:
        StateUnavailable: from `rows`.
    """
    found: list[RefusalRow] = []
    async for raw in rows:
        try:
            row = _decode.decode(raw)
        except msgspec.DecodeError:
            continue
        if matches(row, query):
            if len(found) == query.limit:
                return found, True
            found.append(row)
    return found, False


@router.get(PATH)
async def list_refusals(request: Request, api: Admin, redis: Annotated[Redis, Depends(ingress_redis)]) -> Response:
    """The refusal rows of an org (or of callers not identified), newest first (module doc)."""
    caller = api.caller(request)
    refuse_unknown(request.query_params, KNOWN)
    org: str | None = None
    if not (caller.operator and request.query_params.get("org") == UNIDENTIFIED):
        org, _ = await queried_org(request, api, caller, PATH)  # an org admin's `-`: another org, a 404
    query = parse_query(request.query_params)
    high, low = refusals_stream.id_bounds(query.since_s, query.until_s)
    try:
        rows, more = await newest(refusals_stream.newest_first(redis, org, high=high, low=low), query)
    except StateUnavailable as exc:
        raise GatewayUnavailable(
            "The refusal records are unreachable right now; retry shortly.", retry_after_s=1, code="redis_unavailable"
        ) from exc
    return ok({"object": "list", "org": org, "data": rows, "has_more": more})
