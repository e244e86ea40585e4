"""The audit of admin writes at the ingress: recording each write once answered.

Owns: `AuditMiddleware`, a plain ASGI middleware that records one
`turnout.state.audit_log.AuditEntry` per authenticated write request (POST,
PUT, PATCH, DELETE) under `/admin/v1/` once its answer has been sent —
refusals included — with the caller the admin API identified
(`request.state` `audit_who`) and the body's field names (`audit_fields`),
never a value. The entry's `org` is the caller's (an org admin's own org;
for the operator, the org its accepted write named or created), never read
from the path of a refused request. A write refused before any caller was
known is counted (`turnout_audit_unauthenticated_writes`) and sampled
(`RefusalSampler`) into a separate capped stream, so a flood of them never
evicts a real entry (#40 item 5). The operator's export is
`turnout_ingress.admin.audit_export`.
A Redis failure while recording is logged and does not change the answer.
Must not import: `turnout_ingress.app`.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
from prometheus_client import Counter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from turnout.state.audit_log import AuditEntry, AuditLog, RefusalSampler
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


UNAUTHENTICATED = "unauthenticated"


def entry_org(who: str, state: dict[str, Any], path: str, status: int) -> str | None:
    """The org of an audit entry: the caller's, never the path's of a refused request.

    An org's admin key: its own org (`state["org"]`). The operator: the org it created
    (`audit_org`), else the org an accepted write's path names; a refused one names none.
    No caller known: None.
    """
    if who.startswith("key "):
        return str(state.get("org") or who[4:].partition("/")[0])
    if who == "operator":
        return state.get("audit_org") or (org_of(path) if status < 400 else None)
    return None


def org_of(path: str) -> str | None:
    """The org a route path names (`/admin/v1/orgs/<org>/...`), or None."""
    parts = path.split("/")
    return parts[4] if len(parts) > 4 and parts[3] == "orgs" and parts[4] else None


class AuditRecorder:
    """Where an audit entry goes: an authenticated one appended, an unauthenticated one counted and
    maybe sampled (module doc); a Redis failure is logged, never raised.

    Args:
        audit: the audit log.
        refused: the counter of unauthenticated writes.
        sampler: which of them become samples.
    """

    def __init__(self, audit: AuditLog, refused: Counter, sampler: RefusalSampler) -> None:
        self.audit = audit
        self.refused = refused
        self.sampler = sampler

    async def record(self, entry: AuditEntry) -> None:
        """Record `entry` (see the class doc)."""
        try:
            if entry.who != UNAUTHENTICATED:
                await self.audit.append(entry)
                return
            self.refused.inc()
            count = self.sampler.take()
            if count:
                await self.audit.append_sample(entry, count)
        except StateUnavailable as exc:
            log.warning(
                "audit entry not recorded (%s): %s %s by %s -> %d",
                outage_kind(exc),
                entry.method,
                entry.path,
                entry.who,
                entry.status,
            )


class AuditMiddleware:
    """Records every admin write request after its answer (see module doc)."""

    def __init__(self, app: ASGIApp, recorder: AuditRecorder) -> None:
        self.app = app
        self.recorder = recorder

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
            who = str(state.get("audit_who", UNAUTHENTICATED))
            entry = AuditEntry(
                who=who,
                org=entry_org(who, state, scope["path"], status),
                method=scope["method"],
                path=path,
                fields=tuple(state.get("audit_fields", ())),
                status=status,
            )
            await self.recorder.record(entry)
