"""FastAPI dependencies of the admin routes: the shared `AdminAPI`, who calls, and the request body.

Owns: what every admin route module asks FastAPI for (`Depends`), so a
route module is a plain module-level `APIRouter` with no closure over the
app: `Admin` (the app's `AdminAPI`, set by `turnout_ingress.admin.install`),
`Operator` (the caller, who must hold the operator key: 403 otherwise),
`OrgAdmin` (a caller allowed to act on the path's `{org}`: 404 otherwise,
as for a missing org), `Doc` (that org's document, read from Redis) and `body` (the request body, bounded, with its
field names kept for the audit log).
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import Depends, Request

from turnout.stored.orgs import OrgDoc
from turnout_ingress.admin.access import AdminAPI, Caller
from turnout_ingress.admin.audit import audit_fields
from turnout_ingress.serving.validation import read_body

MAX_BODY_BYTES = 256 * 1024
ORG = "/admin/v1/orgs/{org}"
"""The path of one org; every per-org resource lives below it."""

now = time.time
"""The admin API's wall clock (epoch seconds): creation and update times, key expiry."""


def admin_api(request: Request) -> AdminAPI:
    """The app's `AdminAPI` (one per app, built by `turnout_ingress.admin.install`)."""
    api: AdminAPI = request.app.state.admin_api
    return api


Admin = Annotated[AdminAPI, Depends(admin_api)]


async def operator(request: Request, api: Admin) -> Caller:
    """The caller, who must hold the operator key (401 unknown key, 403 otherwise)."""
    return api.operator(request)


async def org_admin(request: Request, org: str, api: Admin) -> Caller:
    """The caller, if it may act on the path's `org` (401 unknown key, 403 not admin, 404 another org)."""
    return api.scope(request, org)


async def org_doc(request: Request, org: str, api: Admin) -> OrgDoc:
    """The path's org document, for a caller allowed to see it (404 otherwise, as for a missing org; 503 no Redis)."""
    return await api.read(request, org)


Operator = Annotated[Caller, Depends(operator)]
OrgAdmin = Annotated[Caller, Depends(org_admin)]
Doc = Annotated[OrgDoc, Depends(org_doc)]


async def body(request: Request) -> bytes:
    """The request body (413 over `MAX_BODY_BYTES`), its top-level field names kept for the audit log."""
    raw = await read_body(request, MAX_BODY_BYTES)
    request.state.audit_fields = audit_fields(raw)
    return raw
