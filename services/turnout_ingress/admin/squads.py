"""Admin routes of squads: list, create, read (with member keys), delete (SPEC §6)."""

from __future__ import annotations

import msgspec
from fastapi import APIRouter, Request
from starlette.responses import Response

from turnout.stored.orgs import OrgDoc
from turnout.tenancy.admin import SquadCreate, add_squad, decode, not_found, remove_squad
from turnout.tenancy.ceilings import CEILING_FIELDS, check_within, forget, operator_wrote, scope_path
from turnout.tenancy.views import clamps_view, settings_view
from turnout_ingress.admin.access import clamped, ok, rejected
from turnout_ingress.admin.deps import ORG, Admin, Doc, OrgAdmin, body, now

router = APIRouter()


@router.get(ORG + "/squads")
async def list_squads(doc: Doc) -> Response:
    """The org's squads with their own settings."""
    return ok({"squads": [{"name": n, **settings_view(s.settings)} for n, s in doc.squads.items()]})


@router.post(ORG + "/squads")
async def create_squad(request: Request, org: str, api: Admin, caller: OrgAdmin) -> Response:
    """A new squad (201), its settings clamped to the policy ceilings and, for an org admin,
    within the operator's (`turnout.tenancy.ceilings`); the operator's limits and budget become its ceiling."""
    spec = decode(await body(request), SquadCreate)
    settings, clamps = clamped(spec.settings, api, "settings")
    spec = msgspec.structs.replace(spec, settings=settings)
    scope = ("squad", spec.name)

    def edit(doc: OrgDoc) -> tuple[OrgDoc, None]:
        if caller.operator:
            return operator_wrote(add_squad(doc, spec, now()), scope, settings, CEILING_FIELDS), None
        check_within(forget(doc, scope_path(scope)), scope, settings)
        return add_squad(doc, spec, now()), None

    await api.write(request, org, edit)
    return ok({"squad": {"name": spec.name, **settings_view(settings)}, "clamped": clamps_view(clamps)}, 201)


@router.get(ORG + "/squads/{name}")
async def get_squad(name: str, doc: Doc) -> Response:
    """One squad: its settings and the names of its keys."""
    if name not in doc.squads:
        raise rejected(not_found())
    members = sorted(k.name for k in doc.keys.values() if k.squad == name)
    return ok({"squad": {"name": name, **settings_view(doc.squads[name].settings), "keys": members}})


@router.delete(ORG + "/squads/{name}")
async def delete_squad(request: Request, org: str, name: str, api: Admin) -> Response:
    """Delete a squad (refused while a key belongs to it)."""
    await api.write(request, org, lambda doc: (forget(remove_squad(doc, name), f"squads.{name}"), None))
    return ok({"deleted": name})
