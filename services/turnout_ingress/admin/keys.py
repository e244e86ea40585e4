"""Admin routes of gateway keys: list, create (the secret shown once), read, effective settings,
update, revoke, delete (SPEC §6)."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
from fastapi import APIRouter, Request
from msgspec import UnsetType
from starlette.responses import Response

from turnout.core.policy import Clamp
from turnout.stored.orgs import KeyDoc, OrgDoc
from turnout.tenancy.admin import (
    AdminError,
    KeyCreate,
    KeyPatch,
    NoFields,
    add_key,
    decode,
    not_found,
    patch_key,
    remove_key,
    revoke_key,
)
from turnout.tenancy.ceilings import CEILING_FIELDS, check_move, check_within, forget, operator_wrote, scope_path
from turnout.tenancy.orgs import identity_of, new_gateway_key
from turnout.tenancy.views import clamps_view, key_view
from turnout_ingress.admin.access import AdminAPI, Caller, clamped, ok, rejected
from turnout_ingress.admin.deps import ORG, Admin, Doc, OrgAdmin, body, now

router = APIRouter()


@router.get(ORG + "/keys")
async def list_keys(doc: Doc) -> Response:
    """The org's gateway keys (never their secrets or digests)."""
    return ok({"keys": [key_view(k, now()) for k in doc.keys.values()]})


def key_creation(
    api: AdminAPI, caller: Caller, raw: bytes, token: str
) -> tuple[Callable[[OrgDoc], tuple[OrgDoc, KeyDoc]], list[Clamp]]:
    """The edit that adds the gateway key `token` from the JSON body `raw` (`KeyCreate`), and the
    clamps of its policy: the one path of the admin API's `POST .../keys` and the dashboard's new
    key form (`turnout_ingress.ui.pages.settings_keys`). An org admin's key's settings stay within
    the operator's ceilings (`turnout.tenancy.ceilings`); the operator's become the key's ceilings.

    Raises:
        AdminError: 400 a bad body (at once); 400, 403, 409 when applied.
    """
    spec = decode(raw, KeyCreate)
    settings, clamps = clamped(spec.settings, api, "settings")
    spec = msgspec.structs.replace(spec, settings=settings)
    scope = ("key", spec.name)

    def edit(doc: OrgDoc) -> tuple[OrgDoc, KeyDoc]:
        if caller.operator:
            new, key = add_key(doc, spec, token, now())
            return operator_wrote(new, scope, settings, CEILING_FIELDS), key
        check_within(forget(doc, scope_path(scope)), scope, settings, squad=spec.squad)
        return add_key(doc, spec, token, now())

    return edit, clamps


@router.post(ORG + "/keys")
async def create_key(request: Request, org: str, api: Admin, caller: OrgAdmin) -> Response:
    """A new gateway key (201) with its secret, shown in this answer only; an org admin's key's
    settings stay within the operator's ceilings (`turnout.tenancy.ceilings`)."""
    token = new_gateway_key()
    edit, clamps = key_creation(api, caller, await body(request), token)
    key = await api.write(request, org, edit)
    return ok(
        {
            "key": key_view(key, now()),
            "secret": token,
            "clamped": clamps_view(clamps),
            "note": "The secret is shown once; only its hash is stored.",
        },
        201,
    )


def key_answer(doc: OrgDoc, name: str) -> Response:
    """One gateway key's view (404 when missing)."""
    if name not in doc.keys:
        raise rejected(not_found())
    return ok({"key": key_view(doc.keys[name], now())})


@router.get(ORG + "/keys/{name}")
async def get_key(name: str, doc: Doc) -> Response:
    """One gateway key's view."""
    return key_answer(doc, name)


@router.get(ORG + "/keys/{name}/effective")
async def effective(name: str, api: Admin, doc: Doc) -> Response:
    """The settings, policy and limits in force for a key's requests (every scope resolved)."""
    if name not in doc.keys:
        raise rejected(not_found())
    identity = identity_of(doc, doc.keys[name], api.directory.config)
    limits = [{"scope": s.label, **msgspec.to_builtins(s.limits)} for s in identity.limits]
    return ok(
        {
            "settings": msgspec.to_builtins(identity.settings),
            "policy": msgspec.to_builtins(identity.policy),
            "limits": limits,
        }
    )


def key_edit(caller: Caller, name: str, raw: bytes) -> Callable[[OrgDoc], tuple[OrgDoc, None]]:
    """The edit of a key's squad, admin flag or expiry from the JSON body `raw` (`KeyPatch`): the one
    path of the admin API's `PATCH .../keys/{name}` and the dashboard's key form
    (`turnout_ingress.ui.pages.settings_keys`). An org admin does not move a key out of a squad whose
    operator ceiling binds it (`turnout.tenancy.ceilings.check_move`).

    Raises:
        AdminError: 400 an empty body or a bad field (at once); 403 `operator_ceiling`, 404, 400
            an expiry in the past when applied.
    """
    if not raw.strip():
        raise AdminError(
            400,
            "The request body is empty; send a JSON object of the fields to change (`squad`, `admin`, `expires_at`).",
            code="invalid_value",
            param="body",
        )
    spec = decode(raw, KeyPatch)

    def edit(doc: OrgDoc) -> tuple[OrgDoc, None]:
        if not caller.operator and not isinstance(spec.squad, UnsetType):
            check_move(doc, name, spec.squad)
        return patch_key(doc, name, spec, now()), None

    return edit


def revoke_edit(name: str) -> Callable[[OrgDoc], tuple[OrgDoc, None]]:
    """The edit that revokes a key (the admin API's `POST .../keys/{name}/revoke`, the dashboard's revoke)."""
    return lambda doc: (revoke_key(doc, name, now()), None)


@router.patch(ORG + "/keys/{name}")
async def update_key(request: Request, org: str, name: str, api: Admin, caller: OrgAdmin) -> Response:
    """Change a key's squad, admin flag or expiry; the key's new view (an empty body is a 400, not a no-op).
    An org admin does not move a key out of a squad whose operator ceiling binds it (403 `operator_ceiling`)."""
    await api.write(request, org, key_edit(caller, name, await body(request)))
    return key_answer(await api.read(request, org), name)


@router.post(ORG + "/keys/{name}/revoke")
async def revoke(request: Request, org: str, name: str, api: Admin) -> Response:
    """Revoke a key (kept, refused from now on); the key's new view. No body, or `{}`: any field is refused."""
    decode(await body(request), NoFields)
    await api.write(request, org, revoke_edit(name))
    return key_answer(await api.read(request, org), name)


@router.delete(ORG + "/keys/{name}")
async def delete_key(request: Request, org: str, name: str, api: Admin) -> Response:
    """Delete a key."""
    await api.write(request, org, lambda doc: (forget(remove_key(doc, name), f"keys.{name}"), None))
    return ok({"deleted": name})
