"""The audit of admin writes at the ingress: recording each write once answered.

Owns: `AuditMiddleware`, a plain ASGI middleware that records one
`turnout.state.audit_log.AuditEntry` per write request (POST, PUT, PATCH,
DELETE) under `/admin/v1/` once its answer has been sent — refusals
included — with the caller the admin API identified (`request.state`
`audit_who`) and the body's field names (`audit_fields`), never a value. The operator's
export is `turnout_ingress.admin.audit_export`.
A Redis failure while recording is logged and does not change the answer.
Must not import: `turnout_ingress.app`.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from turnout.state.audit_log import AuditEntry, AuditLog
from turnout.state.errors import StateUnavailable, outage_kind

log = logging.getLogger("turnout.audit")

ADMIN_PREFIX = "/admin/v1/"
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def audit_fields(body: bytes) -> tuple[str, ...]:
    """The names of a JSON object body's top-level fields, sorted (never their values); () otherwise."""
    try:
        data = msgspec.json.decode(body or b"null")
    except (msgspec.DecodeError, RecursionError):
        return ()
    return tuple(sorted(str(k) for k in data)) if isinstance(data, dict) else ()


def org_of(path: str) -> str | None:
    """The org a route path names (`/admin/v1/orgs/<org>/...`), or None."""
    parts = path.split("/")
    return parts[4] if len(parts) > 4 and parts[3] == "orgs" and parts[4] else None


class AuditMiddleware:
    """Records every admin write request after its answer (see module doc)."""

    def __init__(self, app: ASGIApp, audit: AuditLog) -> None:
        self.app = app
        self.audit = audit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in WRITES or not scope["path"].startswith(ADMIN_PREFIX):
            await self.app(scope, receive, send)
            return
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            state: dict[str, Any] = scope.get("state") or {}
            path = scope.get("raw_path", b"").decode("latin-1") or scope["path"]  # as sent: `%2F` stays apart from `/`
            entry = AuditEntry(
                who=str(state.get("audit_who", "unauthenticated")),
                org=state.get("audit_org") or org_of(scope["path"]),  # a created org names itself
                method=scope["method"],
                path=path,
                fields=tuple(state.get("audit_fields", ())),
                status=status,
            )
            try:
                await self.audit.append(entry)
            except StateUnavailable as exc:
                log.warning(
                    "audit entry not recorded (%s): %s %s by %s -> %d",
                    outage_kind(exc),
                    entry.method,
                    entry.path,
                    entry.who,
                    entry.status,
                )
