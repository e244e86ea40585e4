"""Admin routes of orgs: list, create (operator), read, delete (operator) (SPEC §6)."""

from __future__ import annotations

import contextlib
import logging

from fastapi import APIRouter, Request
from starlette.responses import Response

from turnout.errors import ConfigError
from turnout.state.errors import StateUnavailable
from turnout.state.org_purge import purge_org_state
from turnout.stored.orgs import OrgDoc
from turnout.tenancy.admin import AdminError, OrgCreate, check_name, decode, not_found
from turnout.tenancy.ceilings import CEILING_FIELDS, operator_wrote
from turnout.tenancy.orgs import validate_org
from turnout.tenancy.views import clamps_view, org_view
from turnout_ingress.admin.access import clamped, ok, unavailable
from turnout_ingress.admin.deps import ORG, Admin, Doc, Operator, body, now

router = APIRouter()
log = logging.getLogger(__name__)


@router.get("/admin/v1/orgs")
async def list_orgs(request: Request, api: Admin) -> Response:
    """Every org for the operator; the caller's own org for an org admin."""
    caller = api.caller(request)
    try:
        ids = sorted(await api.store.org_versions()) if caller.operator else [caller.org or ""]
        docs = await api.store.load_many(ids)
    except StateUnavailable as exc:
        raise unavailable() from exc
    return ok({"orgs": [org_view(doc, now()) for doc, _ in docs.values()]})


@router.post("/admin/v1/orgs")
async def create_org(request: Request, api: Admin, _: Operator) -> Response:
    """A new org (201; 409 when it exists), its settings clamped to the ceilings. An id used by
    a deleted org starts clean: what that org left (spend, limit counters, Idempotency-Key
    bindings) is removed first (`purge_org_state`), and its records are not the new org's
    (exports read from `created_s`)."""
    spec = decode(await body(request), OrgCreate)
    check_name("id", spec.id)
    request.state.audit_org = spec.id  # the audit log's `org` of this write (its path names none)
    settings, clamps = clamped(spec.settings, api, "settings")
    doc = operator_wrote(
        OrgDoc(id=spec.id, settings=settings, created_s=now()), ("org", None), settings, CEILING_FIELDS
    )
    try:
        existing, _version = await api.store.load(spec.id)
        if existing is None:  # (an existing org is the 409 below, left untouched)
            await purge_org_state(request.app.state.turnout.redis, spec.id)
    except StateUnavailable as exc:
        raise unavailable() from exc

    def mutate(current: OrgDoc | None) -> tuple[OrgDoc | None, None]:
        if current is not None:
            raise AdminError(409, f"org {spec.id!r} already exists", code="conflict", param="id")
        try:
            validate_org(doc, api.directory.config, api.directory.allow)
        except ConfigError as exc:
            raise AdminError(400, str(exc), code="invalid_value", param=str(exc).split(":", 1)[0]) from None
        return doc, None

    await api._update(spec.id, mutate)
    return ok({"org": org_view(doc, now()), "clamped": clamps_view(clamps)}, 201)


@router.get(ORG)
async def get_org(doc: Doc) -> Response:
    """One org's view."""
    return ok({"org": org_view(doc, now())})


@router.delete(ORG)
async def delete_org(request: Request, org: str, api: Admin, _: Operator) -> Response:
    """Delete an org and everything in it (404 when missing): its document, then what it left in
    Redis (`purge_org_state`; best effort here, done again before the id is created anew)."""

    def mutate(current: OrgDoc | None) -> tuple[OrgDoc | None, None]:
        if current is None:
            raise not_found()
        return None, None

    await api._update(org, mutate, delete=True)
    with contextlib.suppress(StateUnavailable):
        purged = await purge_org_state(request.app.state.turnout.redis, org)
        log.info("org %s deleted; %d keys of its spend, limits and Idempotency-Keys removed", org, purged)
    return ok({"deleted": org})
