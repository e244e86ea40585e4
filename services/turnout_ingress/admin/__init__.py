"""The admin API: `/admin/v1/...` — tenancy, secrets, spend, records and audit exports (SPEC §6, §9, §10).

Owns: putting the admin routes on the ingress app. Each resource is one
module with a module-level `APIRouter`; adding a resource is one module and
one line in `ROUTERS`. What the routes share comes through FastAPI
dependencies (`turnout_ingress.admin.deps`): the `AdminAPI` of
`turnout_ingress.admin.access` (who may call, reading an org, applying an
edit with compare-and-set), the operator / org-admin checks, the bounded
body. Callers: the operator key (`TURNOUT_OPERATOR_KEY`: every org; creates
and deletes orgs; rotates secrets) and an org's admin keys (`admin: true`:
that org only; another org's objects answer 404, exactly as missing ones).
Reads come straight from Redis; secrets appear masked (`…a1b2`), a new
gateway key's secret only in the answer that creates it.

    orgs            GET /admin/v1/orgs    POST /admin/v1/orgs (operator)
                    GET /admin/v1/orgs/{org}    DELETE /admin/v1/orgs/{org} (operator)
    settings        GET|PUT|PATCH  .../settings   .../squads/{s}/settings   .../keys/{k}/settings
    squads          GET|POST .../squads    GET|DELETE .../squads/{s}
    keys            GET|POST .../keys    GET|PATCH|DELETE .../keys/{k}
                    POST .../keys/{k}/revoke    GET .../keys/{k}/effective
    provider_keys   GET .../provider-keys    PUT|DELETE .../provider-keys/{provider}
    endpoints       GET .../custom-endpoints    GET|PUT|DELETE .../custom-endpoints/{id}
    spend           GET .../spend?period=day|month&at=…    the spend ledger (SPEC §10)
    secrets         POST /admin/v1/secrets/rotate (operator)
    records         GET /admin/v1/logs/export?org=…&format=jsonl|csv&since=…&until=… (admin key: its org;
                    the operator: the org `org` names)
    refusals        GET /admin/v1/refusals?org=…&since=…&until=…&route=…&status=…&code=…&limit=… the door
                    refusals' rows (admin key: its org; the operator: the org `org` names, `-` for callers
                    not identified)
    audit_export    GET /admin/v1/audit/export?since=…&until=… (operator)
    catalog         GET /admin/v1/catalog    PUT|DELETE /admin/v1/catalog/models/{model}
                    PUT|DELETE /admin/v1/catalog/providers/{provider}    models and providers (operator)

Every write is recorded in the audit log (`turnout_ingress.admin.audit`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter, FastAPI, Request
from starlette.responses import Response

from turnout.state.audit_log import AuditLog, RefusalSampler
from turnout.tenancy.admin import AdminError
from turnout_ingress.admin import (
    audit_export,
    catalog,
    endpoints,
    keys,
    orgs,
    provider_keys,
    records,
    refusals,
    secrets,
    settings,
    spend,
    squads,
)
from turnout_ingress.admin.access import AdminAPI, rejected
from turnout_ingress.admin.audit import AuditMiddleware, AuditRecorder
from turnout_ingress.errors import error_response, naming_the_object

if TYPE_CHECKING:
    from turnout_ingress.state import IngressState

ROUTERS: tuple[APIRouter, ...] = (
    records.router,
    refusals.router,
    orgs.router,
    spend.router,
    settings.router,
    squads.router,
    keys.router,
    provider_keys.router,
    endpoints.router,
    secrets.router,
    audit_export.router,
    catalog.router,
)
"""Every admin resource's router, included in this order."""


async def admin_error(request: Request, exc: Exception) -> Response:
    """An `AdminError` raised by an edit as its OpenAI-format error answer."""
    assert isinstance(exc, AdminError)
    refusal = rejected(exc)
    return error_response(
        exc.status_code,
        naming_the_object(refusal.message, refusal.code, request),
        error_type=refusal.error_type,
        code=refusal.code,
        param=refusal.param,
    )


def install(app: FastAPI, state: IngressState) -> None:
    """Put the admin API on `app`: its shared objects, error handler, audit middleware and routers.

    The operator key is `TURNOUT_OPERATOR_KEY` (`state.settings.operator_key`).
    """
    app.state.admin_api = AdminAPI(state.keyring, state.settings.operator_key)
    app.state.audit_log = AuditLog(state.redis, retention_s=state.settings.audit_retention_days * 86400)
    app.state.audit_recorder = AuditRecorder(app.state.audit_log, state.metrics.audit_unauthenticated, RefusalSampler())
    app.add_exception_handler(AdminError, admin_error)
    app.add_middleware(AuditMiddleware, recorder=app.state.audit_recorder)
    for router in ROUTERS:
        app.include_router(router)
