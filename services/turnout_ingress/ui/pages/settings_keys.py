"""The Settings pages' key and provider key forms: a new gateway key, a key's squad, admin flag,
expiry and revocation, and an org's own provider keys (BYOK), edited from the dashboard (#45 item 8).

    POST /ui/settings/{org}/keys/{key}/access          the key's squad, admin flag, expiry saved
    POST /ui/settings/{org}/keys/{key}/revoke          a confirm page; `step=confirm`: revoked
    POST /ui/settings/{org}/keys                       a new key, its secret shown on this answer only
    POST /ui/settings/{org}/provider-keys              the org's key for the form's `provider` set
    POST /ui/settings/{org}/provider-keys/{p}/remove   a confirm page; `step=confirm`: removed

One write path each: the admin API's own edits (`turnout_ingress.admin.keys.key_creation` /
`key_edit` / `revoke_edit`, `turnout_ingress.admin.provider_keys.provider_key_edit` / `provider_key_removal`:
the same decoding, error words and operator-ceiling rule) through `AdminAPI.write_as`, and an
audit entry like the admin API's (`POST .../keys`, `PATCH .../keys/<key>`, `POST .../keys/<key>/revoke`,
`PUT|DELETE .../provider-keys/<provider>`). A provider key is taken from a password field and saved
on submit: no review page carries it, no page, URL or log shows it; pages show the admin API's
masked tail. A new gateway key's secret is shown once, on the answer to its form's POST
(`no-store`), never in a URL, a log or a later page. Every POST carries the session's CSRF token
(403 without it, nothing read).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import msgspec
from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from turnout.errors import GatewayUnavailable, RequestRejected
from turnout.stored.orgs import KeyDoc, OrgDoc
from turnout.tenancy.admin import AdminError
from turnout.tenancy.orgs import new_gateway_key
from turnout_ingress.admin.access import Caller, rejected
from turnout_ingress.admin.audit import audit_fields
from turnout_ingress.admin.keys import key_creation, key_edit, revoke_edit
from turnout_ingress.admin.provider_keys import provider_key_edit, provider_key_removal
from turnout_ingress.ui import csrf
from turnout_ingress.ui.deps import Board, PageRoute, Viewer
from turnout_ingress.ui.key_form import key_create, key_patch, provider_key_put
from turnout_ingress.ui.pages.settings import Place, checked_post, form_page, place, record_write
from turnout_ingress.ui.render import SECURITY_HEADERS, page
from turnout_ingress.ui.settings_form import form_values

router = APIRouter(route_class=PageRoute, include_in_schema=False)

_json = msgspec.json.Encoder()


def _q(name: str) -> str:
    return quote(name, safe="")


class Write(msgspec.Struct, frozen=True, kw_only=True):
    """One dashboard write: the admin API's edit (built when saved: its decoding refuses there too),
    its audit entry as the admin API's (`method`, `path` under `/admin/v1/`, the body's `fields`),
    where to go once saved, and the template variable a refusal's words go in."""

    edit: Callable[[], Callable[[OrgDoc], tuple[OrgDoc, Any]]]
    method: str
    path: str
    fields: tuple[str, ...] = ()
    done: str | Callable[[Any], Response]
    error_at: str
    status: int = 200
    typed: dict[str, Any] = {}
    """What the form held, shown again on a refusal (`access`: the key form's texts, `new_key`:
    the new key form's), so a refusal keeps what was typed."""


async def _save(request: Request, caller: Caller, board: Board, at: Place, write: Write) -> Response:
    """Write `write.edit()`, record its audit entry (`write.status`, the admin API's answer), then
    303 to `write.done` (or its page of the edit's result); a refusal: the scope's page again with
    the admin API's words at `write.error_at`."""
    try:
        result = await board.access.write_as(caller, at.org, write.edit())
    except (RequestRejected, AdminError) as exc:
        refusal = rejected(exc) if isinstance(exc, AdminError) else exc
        await record_write(request, caller, at.org, write.method, write.path, write.fields, refusal.status_code)
        fresh = await place(request, caller, board) or at
        extra: dict[str, Any] = {write.error_at: refusal.message, **write.typed}
        values = form_values(fresh.current)  # the settings form below as saved, not emptied
        return form_page(
            request, board, caller, fresh.doc, fresh.org, fresh.scope, values, status=refusal.status_code, **extra
        )
    except GatewayUnavailable as exc:
        return page("error.html", caller, status=503, message=str(exc), nav="settings")
    await record_write(request, caller, at.org, write.method, write.path, write.fields, write.status)
    if not isinstance(write.done, str):
        return write.done(result)
    return RedirectResponse(write.done, status_code=303, headers=SECURITY_HEADERS)


async def _submit(
    request: Request, caller: Caller, board: Board, build: Callable[[dict[str, str], Place], Write | Response]
) -> Response:
    """A POST's form checked (`checked_post`: 413, 403 CSRF, 404), then `build`'s write saved
    (`_save`), or the page it answers instead."""
    checked = await checked_post(request, caller, board)
    if isinstance(checked, Response):
        return checked
    form, at = checked
    write = build(form, at)
    return write if isinstance(write, Response) else await _save(request, caller, board, at, write)


async def _confirmed(request: Request, caller: Caller, board: Board, what: str, back: str, write: Write) -> Response:
    """An irreversible write: without `step=confirm`, the confirm page (`what`, posting `step=confirm`
    back here, `back` to cancel); with it, `_save`."""

    def build(form: dict[str, str], _: Place) -> Write | Response:
        if form.get("step") == "confirm":
            return write
        context: dict[str, Any] = {
            "url": request.url.path,
            "back": back,
            "what": what,
            "csrf": csrf.of_request(request),
        }
        return page("settings_confirm.html", caller, nav="settings", **context)

    return await _submit(request, caller, board, build)


@router.post("/ui/settings/{org}/keys/{key}/access")
async def key_access(request: Request, caller: Viewer, board: Board) -> Response:
    """Save the key form's squad, admin flag and expiry (the admin API's `PATCH .../keys/{key}`)."""
    return await _submit(request, caller, board, lambda form, at: _access(request, caller, board, form, at))


def _access(request: Request, caller: Caller, board: Board, form: dict[str, str], at: Place) -> Write | Response:
    """The key form's write: its change as the admin API's `PATCH` body (`key_patch`)."""
    name = at.scope[1] or ""
    patch = key_patch(form, at.doc.keys[name])
    here = f"/ui/settings/{_q(at.org)}/keys/{_q(name)}"
    if not patch:
        values = form_values(at.current)
        return form_page(request, board, caller, at.doc, at.org, at.scope, values, access_notice="Nothing to change.")
    raw = _json.encode(patch)
    path = f"/admin/v1/orgs/{_q(at.org)}/keys/{_q(name)}"
    done = f"{here}?saved=" + quote(",".join(sorted(patch)), safe=",")
    write = Write(
        edit=lambda: key_edit(caller, name, raw), method="PATCH", path=path, done=done, error_at="access_error"
    )
    typed = {"access": {field: form.get(field, "") for field in ("squad", "admin", "expires_at")}}
    return msgspec.structs.replace(write, fields=audit_fields(raw), typed=typed)


@router.post("/ui/settings/{org}/keys")
async def key_new(request: Request, caller: Viewer, board: Board) -> Response:
    """Create a gateway key (the admin API's `POST .../keys`): the answer shows its secret, once."""
    return await _submit(request, caller, board, lambda form, at: _new_key(caller, board, form, at))


def _new_key(caller: Caller, board: Board, form: dict[str, str], at: Place) -> Write:
    """The new key form's write (`key_create`), answered with the page that shows the secret once."""
    raw = _json.encode(key_create(form))
    token = new_gateway_key()

    def shown(key: KeyDoc) -> Response:
        here = f"/ui/settings/{_q(at.org)}/keys/{_q(key.name)}"
        return page("settings_key_created.html", caller, nav="settings", org=at.org, key=key, secret=token, url=here)

    path = f"/admin/v1/orgs/{_q(at.org)}/keys"
    edit = lambda: key_creation(board.access, caller, raw, token)[0]
    write = Write(edit=edit, method="POST", path=path, fields=audit_fields(raw), done=shown, error_at="create_error")
    typed = {"new_key": {field: form.get(field, "") for field in ("name", "squad", "admin", "expires_at")}}
    return msgspec.structs.replace(write, status=201, typed=typed)


@router.post("/ui/settings/{org}/keys/{key}/revoke")
async def key_revoke(request: Request, caller: Viewer, board: Board, org: str, key: str) -> Response:
    """The confirm page; `step=confirm`: revoke the key (the admin API's `POST .../keys/{key}/revoke`)."""
    here = f"/ui/settings/{_q(org)}/keys/{_q(key)}"
    what = f"Revoke key {key} of {org}: its requests are refused from now on (the key is kept for the records)."
    path = f"/admin/v1/orgs/{_q(org)}/keys/{_q(key)}/revoke"
    write = Write(
        edit=lambda: revoke_edit(key), method="POST", path=path, done=f"{here}?saved=revoked", error_at="access_error"
    )
    return await _confirmed(request, caller, board, what, here, write)


@router.post("/ui/settings/{org}/provider-keys")
async def provider_key_set(request: Request, caller: Viewer, board: Board) -> Response:
    """Set the org's key for the form's `provider` from its `api_key` (the admin API's
    `PUT .../provider-keys/{provider}`); saved on submit, never shown again."""
    return await _submit(request, caller, board, lambda form, at: _byok(request, caller, board, form, at))


def _byok(request: Request, caller: Caller, board: Board, form: dict[str, str], at: Place) -> Write | Response:
    """The provider key form's write (`provider_key_put`)."""
    provider = form.get("provider", "").strip()
    here = f"/ui/settings/{_q(at.org)}"
    if not provider:
        values = form_values(at.current)
        return form_page(
            request,
            board,
            caller,
            at.doc,
            at.org,
            at.scope,
            values,
            status=400,
            byok_error="provider: choose a provider.",
        )
    raw = provider_key_put(form)
    path = f"/admin/v1/orgs/{_q(at.org)}/provider-keys/{_q(provider)}"
    done = f"{here}?saved=" + quote(f"provider key {provider}", safe="")
    edit = lambda: provider_key_edit(request, board.access, at.org, provider, raw)
    return Write(edit=edit, method="PUT", path=path, fields=("api_key",), done=done, error_at="byok_error")


@router.post("/ui/settings/{org}/provider-keys/{provider}/remove")
async def provider_key_remove(request: Request, caller: Viewer, board: Board, org: str, provider: str) -> Response:
    """The confirm page; `step=confirm`: remove the org's key for `provider` (the admin API's `DELETE`)."""
    here = f"/ui/settings/{_q(org)}"
    what = f"Remove {org}'s own key for provider {provider}: its requests use the shared key, if its key mode allows."
    path = f"/admin/v1/orgs/{_q(org)}/provider-keys/{_q(provider)}"
    done = f"{here}?saved=" + quote(f"provider key {provider} removed", safe="")
    write = Write(
        edit=lambda: provider_key_removal(provider), method="DELETE", path=path, done=done, error_at="byok_error"
    )
    return await _confirmed(request, caller, board, what, here, write)
