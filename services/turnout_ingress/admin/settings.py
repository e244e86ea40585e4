"""Admin routes of scope settings: `GET|PUT|PATCH` the settings of an org, a squad or a key (SPEC §6).

PUT replaces a scope's settings whole (`{}` sets every setting to inherit),
PATCH changes the fields it names; either way a value outside its field's
domain (a negative count, a number out of range) is refused with a 400
naming the field (`turnout.tenancy.admin.decode`), and the policy is
clamped to the ceilings and the clamps are returned. The edit itself
(`settings_edit`) is also the dashboard's Settings pages' (`turnout_ingress.ui.pages.settings`):
one write path, one set of checks and error words.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from turnout.core.policy import Clamp
from turnout.core.scopes import ScopeSettings
from turnout.stored.orgs import OrgDoc
from turnout.tenancy.admin import AdminError, decode, scope_settings, settings_patch, with_settings
from turnout.tenancy.ceilings import CEILING_FIELDS, check_within, operator_wrote
from turnout.tenancy.views import clamps_view, settings_view
from turnout_ingress.admin.access import AdminAPI, Caller, clamped, decode_settings, ok, safe
from turnout_ingress.admin.deps import ORG, Admin, Doc, OrgAdmin, body, now

router = APIRouter()

Scope = tuple[str, str | None]
"""(`org` | `squad` | `key`, the squad's or key's name; None for the org)."""


async def settings_scope(request: Request) -> Scope:
    """The scope a settings path names: `.../squads/{squad}/...`, `.../keys/{key}/...`, else the org."""
    params = request.path_params
    if "squad" in params:
        return ("squad", params["squad"])
    if "key" in params:
        return ("key", params["key"])
    return ("org", None)


Edit = Callable[[OrgDoc], tuple[OrgDoc, list[Clamp]]]
"""An edit of an org's document that also answers the clamps of the policy it wrote."""


def settings_edit(
    api: AdminAPI, caller: Caller, scope: Scope, raw: bytes, patch: bool, expect: ScopeSettings | None = None
) -> Edit:
    """The edit that replaces (`patch` False) or patches a scope's settings from the JSON body `raw`:
    the one path of the admin API's `PUT|PATCH .../settings` and the dashboard's settings pages.

    The policy is clamped to the ceilings (the clamps are the edit's result). The operator's
    `limits` and `budget` become the scope's ceilings; an org admin's write that would lift,
    remove or escape one is refused (403 `operator_ceiling`, `turnout.tenancy.ceilings`).
    `expect`: the scope's settings the caller saw (the dashboard's review); other settings found
    there are refused (409 `conflict`), nothing written.

    Raises:
        AdminError: 400 an empty body (at once) or a bad value (when applied); 403, 404, 409
            when applied.
    """
    if not raw.strip():  # an empty PUT must not wipe every setting by mistake
        raise AdminError(
            400,
            "The request body is empty; send a JSON object of the settings to change."
            if patch
            else "The request body is empty; send a JSON object (`{}` to set every setting to inherit).",
            code="invalid_value",
            param="body",
        )

    def edit(doc: OrgDoc) -> tuple[OrgDoc, list[Any]]:
        current = scope_settings(doc, scope)
        if expect is not None and current != expect:
            raise AdminError(
                409, "The settings changed since they were read; review the change again.", code="conflict"
            )
        new = settings_patch(current, raw, "settings") if patch else decode_settings(raw)
        new, clamps = clamped(new, api, "settings")
        if caller.operator:
            named = tuple(decode(raw, dict[str, Any], "settings")) if patch else CEILING_FIELDS
            return operator_wrote(with_settings(doc, scope, new, now()), scope, new, named), clamps
        check_within(doc, scope, new)
        return with_settings(doc, scope, new, now()), clamps

    return edit


async def save(request: Request, api: Admin, caller: Caller, org: str, scope: Scope, patch: bool) -> Response:
    """Replace (`patch` False) or patch a scope's settings (`settings_edit`); the new settings and the clamps."""
    raw = await body(request)
    clamps = await api.write(request, org, settings_edit(api, caller, scope, raw, patch))
    doc = await api.read(request, org)
    return ok({**settings_view(scope_settings(doc, scope)), "clamped": clamps_view(clamps)})


@router.get(ORG + "/settings")
@router.get(ORG + "/squads/{squad}/settings")
@router.get(ORG + "/keys/{key}/settings")
async def get_settings(doc: Doc, scope: Annotated[Scope, Depends(settings_scope)]) -> Response:
    """A scope's own settings (404 for a missing squad or key)."""
    return ok(settings_view(safe(lambda: scope_settings(doc, scope))))


@router.put(ORG + "/settings")  # one route per method: each its own OpenAPI operation id
@router.patch(ORG + "/settings")
@router.put(ORG + "/squads/{squad}/settings")
@router.patch(ORG + "/squads/{squad}/settings")
@router.put(ORG + "/keys/{key}/settings")
@router.patch(ORG + "/keys/{key}/settings")
async def set_settings(
    request: Request,
    org: str,
    api: Admin,
    caller: OrgAdmin,
    scope: Annotated[Scope, Depends(settings_scope)],
) -> Response:
    """PUT replaces a scope's settings whole; PATCH changes the fields the body names."""
    return await save(request, api, caller, org, scope, patch=request.method == "PATCH")
