"""Admin route of the audit log: `GET /admin/v1/audit/export?since=…&until=…` (operator key only).

JSON lines, oldest first; `since` / `until` as for the records export
(`turnout_ingress.admin.time_query.parse_range`: a 400 `invalid_value`
naming the parameter for a bad one, naming `since` when it is later than
`until`). What is recorded, and when,
is `turnout_ingress.admin.audit`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

import msgspec
from fastapi import APIRouter, Depends, Request
from starlette.responses import Response, StreamingResponse

from turnout.errors import GatewayUnavailable, RequestRejected
from turnout.state.audit_log import AuditLog
from turnout.state.errors import StateUnavailable
from turnout_ingress.admin.deps import Operator
from turnout_ingress.admin.time_query import parse_range, refuse_unknown

router = APIRouter()
_encode = msgspec.json.Encoder()


def audit_log(request: Request) -> AuditLog:
    """The app's audit log (set by `turnout_ingress.admin.install`)."""
    audit: AuditLog = request.app.state.audit_log
    return audit


@router.get("/admin/v1/audit/export")
async def export_audit(
    request: Request,
    _: Operator,
    audit: Annotated[AuditLog, Depends(audit_log)],
) -> Response:
    """The audit entries with `since <= ts <= until`, as a JSON-lines download (503 when Redis is unreachable);
    `samples=true`: the samples of unauthenticated writes instead (each with `count`)."""
    refuse_unknown(request.query_params, ("since", "until", "samples"))
    since_s, until_s = parse_range(request.query_params)
    samples = request.query_params.get("samples", "false").lower()
    if samples not in ("true", "false"):
        raise RequestRejected(400, "`samples` must be `true` or `false`.", param="samples", code="invalid_value")
    entries = audit.read(since_s=since_s, until_s=until_s, samples=samples == "true")
    try:
        first = await anext(entries, None)
    except StateUnavailable as exc:
        raise GatewayUnavailable(
            "The audit log is unreachable right now; retry shortly.",
            retry_after_s=1,
            code="redis_unavailable",
        ) from exc

    async def body() -> AsyncIterator[bytes]:
        if first is None:
            return
        yield _encode.encode(first) + b"\n"
        async for entry in entries:
            yield _encode.encode(entry) + b"\n"

    return StreamingResponse(
        body(),
        media_type="application/x-ndjson",
        headers={"content-disposition": 'attachment; filename="turnout-audit.jsonl"'},
    )
