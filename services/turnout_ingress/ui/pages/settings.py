"""The Settings pages: `/ui/settings`, a scope's routing settings edited from the dashboard (#45 item 8).

    GET  /ui/settings                         the operator: the orgs; an org's admin: its org
    GET  /ui/settings/{org}                   the org's settings form, its squads and keys
    GET  /ui/settings/{org}/squads/{squad}    a squad's form
    GET  /ui/settings/{org}/keys/{key}        a key's form
    POST (the same three)                     `step=review`: the diff of the form's change;
                                              `step=confirm`: the reviewed change saved

One write path: the form becomes the admin API's `PATCH .../settings` body
(`turnout_ingress.ui.settings_form.to_patch`) and goes through the admin API's own edit
(`turnout_ingress.admin.settings.settings_edit`: the same decoding and its error wording, the
policy clamped to the ceilings, the operator's `limits` / `budget` ceilings, the whole document
validated, compare-and-set) and writer (`AdminAPI.preview_as` for the review, `write_as` to save),
and the save is an audit entry like the admin API's (`PATCH /admin/v1/orgs/<org>/.../settings`,
`who` the session's key, the changed settings' names). The review carries the settings it was made
against; a save finding others there is refused (409) and the form shown again.

Who edits: the operator any org; an org's admin its own org (another org's pages are 404, as in
the admin API). Every POST carries the session's CSRF token (`turnout_ingress.ui.csrf`): missing
or wrong is a 403 page, nothing read. Plain forms: no script needed.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, quote

import msgspec
from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from turnout.core.scopes import ScopeSettings
from turnout.errors import GatewayUnavailable, RequestRejected
from turnout.state.audit_log import AuditEntry
from turnout.stored.orgs import OrgDoc
from turnout.tenancy.admin import AdminError, scope_settings
from turnout.tenancy.ceilings import Scope, ceilings_view, scope_path
from turnout.tenancy.views import clamps_view, provider_key_view
from turnout_ingress.admin.access import Caller, rejected
from turnout_ingress.admin.audit import AuditRecorder
from turnout_ingress.admin.settings import settings_edit
from turnout_ingress.serving.validation import read_body
from turnout_ingress.ui import csrf
from turnout_ingress.ui.deps import Board, PageRoute, Viewer
from turnout_ingress.ui.key_form import key_values
from turnout_ingress.ui.render import SECURITY_HEADERS, page
from turnout_ingress.ui.settings_force import in_force
from turnout_ingress.ui.settings_form import FIELDS, GROUPS, Change, FormError, diff, field_of, form_values, to_patch

router = APIRouter(route_class=PageRoute, include_in_schema=False)

MAX_FORM_BYTES = 256 * 1024
CSRF_REFUSED = "This form's CSRF token is missing or wrong (an old page, or another site's form); reload and try again."
_json = msgspec.json.Encoder()
_NO_EXTRA: dict[str, Any] = {
    "access_notice": None,
    "access_error": None,
    "byok_error": None,
    "create_error": None,
    "new_key": {},
}


def _where(request: Request) -> tuple[str, Scope]:
    """The org and scope a settings URL names."""
    params = request.path_params
    if "squad" in params:
        return params["org"], ("squad", params["squad"])
    if "key" in params:
        return params["org"], ("key", params["key"])
    return params["org"], ("org", None)


def _tail(org: str, scope: Scope) -> str:
    """`<org>`, `<org>/squads/<squad>` or `<org>/keys/<key>`, quoted."""
    kind, name = scope
    return quote(org, safe="") + ("" if kind == "org" else f"/{kind}s/{quote(name or '', safe='')}")


def _url(org: str, scope: Scope) -> str:
    """The dashboard's URL of a scope's settings."""
    return f"/ui/settings/{_tail(org, scope)}"


def _admin_path(org: str, scope: Scope) -> str:
    """The admin API's path of the scope's settings (the audit entry's)."""
    return f"/admin/v1/orgs/{_tail(org, scope)}/settings"


async def _doc(board: Board, caller: Caller, org: str) -> OrgDoc | None:
    """The org's document for `caller` (None: missing, or another org's).

    Raises:
        StateUnavailable: Redis unreachable (the page's 503).
    """
    if not caller.operator and caller.org != org:
        return None
    doc, _ = await board.access.store.load(org)
    return doc


class Place(msgspec.Struct, frozen=True, kw_only=True):
    """The scope a settings URL names, as `caller` may see it now."""

    org: str
    scope: Scope
    doc: OrgDoc
    current: ScopeSettings


async def place(request: Request, caller: Caller, board: Board) -> Place | None:
    """The org, scope, document and the scope's own settings of a settings URL (None: no such
    org, squad or key for `caller`).

    Raises:
        StateUnavailable: Redis unreachable (the page's 503).
    """
    org, scope = _where(request)
    doc = await _doc(board, caller, org)
    if doc is None:
        return None
    try:
        return Place(org=org, scope=scope, doc=doc, current=scope_settings(doc, scope))
    except AdminError:
        return None


def missing(caller: Caller) -> Response:
    return page("error.html", caller, status=404, message="No such org, squad or key.", nav="settings")


@router.get("/ui/settings")
async def settings_home(caller: Viewer, board: Board) -> Response:
    """The operator: every org, each a link to its settings; an org's admin: its org's page (303)."""
    if not caller.operator:
        return RedirectResponse(_url(caller.org or "", ("org", None)), status_code=303, headers=SECURITY_HEADERS)
    orgs = sorted(await board.access.store.org_versions())
    return page("settings_orgs.html", caller, orgs=orgs, nav="settings")


@router.get("/ui/settings/{org}")
@router.get("/ui/settings/{org}/squads/{squad}")
@router.get("/ui/settings/{org}/keys/{key}")
async def settings_page(request: Request, caller: Viewer, board: Board) -> Response:
    """A scope's settings form, filled with its own settings (`saved`: the names just saved)."""
    at = await place(request, caller, board)
    if at is None:
        return missing(caller)
    saved = saved_names(request.query_params.get("saved", ""))
    return form_page(request, board, caller, at.doc, at.org, at.scope, form_values(at.current), saved=saved)


SAVED_NAME = re.compile(r"[a-z_.]{1,64}|revoked|provider key [A-Za-z0-9._-]{1,64}( removed)?")
"""What a `?saved=` entry may say: a setting or field name, `revoked`, a provider key set or
removed: the words this dashboard's own redirects write, nothing a link could put there."""


def saved_names(text: str) -> list[str]:
    """The `?saved=` list (comma-separated) kept to what `SAVED_NAME` allows, at most 40 entries."""
    return [s for s in text.split(",")[:40] if SAVED_NAME.fullmatch(s)]


def _force(board: Board, doc: OrgDoc, scope: Scope) -> dict[str, tuple[str, str]]:
    """For a key: each field's value in force and its scope (`settings_force.in_force`); else none."""
    kind, name = scope
    key = doc.keys.get(name or "") if kind == "key" else None
    if key is None:
        return {}
    squad = (key.squad, doc.squads[key.squad].settings) if key.squad in doc.squads else None
    config = board.access.directory.config
    return in_force(doc.settings, squad, key.settings, config.policy, config.raw.ceilings)


def form_page(
    request: Request,
    board: Board,
    caller: Caller,
    doc: OrgDoc,
    org: str,
    scope: Scope,
    values: dict[str, str],
    *,
    status: int = 200,
    errors: dict[str, str] | None = None,
    saved: list[str] | None = None,
    notice: str | None = None,
    **extra: Any,
) -> Response:
    """The form of a scope's settings with `values`, the errors by field (`""`: the form's top);
    `extra`: more of the template's context (the key and provider key forms', `settings_keys`)."""
    kind, name = scope
    key = doc.keys.get(name or "") if kind == "key" else None
    return page(
        "settings_scope.html",
        caller,
        force=_force(board, doc, scope),
        status=status,
        nav="settings",
        org=org,
        scope=scope,
        url=_url(org, scope),
        doc=doc,
        fields=FIELDS,
        groups=GROUPS,
        values=values,
        errors=errors or {},
        saved=saved or [],
        notice=notice,
        ceilings=ceilings_view(doc),
        csrf=csrf.of_request(request),
        access=extra.pop("access", None) or (key_values(key) if key is not None else None),
        provider_keys=[provider_key_view(p, k) for p, k in doc.provider_keys.items()] if kind == "org" else None,
        providers=sorted(board.access.directory.config.raw.providers) if kind == "org" else [],
        **{**_NO_EXTRA, **extra},
    )


async def read_form(request: Request) -> dict[str, str]:
    """The POSTed form's fields (the first of each name), bounded to `MAX_FORM_BYTES` (413)."""
    raw = await read_body(request, MAX_FORM_BYTES)
    parsed = parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[0] for k, v in parsed.items()}


async def checked_post(request: Request, caller: Caller, board: Board) -> tuple[dict[str, str], Place] | Response:
    """A settings POST's form and the place its URL names, or the refusal page: 413 over
    `MAX_FORM_BYTES`, 403 without the session's CSRF token (nothing else read), 404 no such place.

    Raises:
        StateUnavailable: Redis unreachable (the page's 503).
    """
    try:
        form = await read_form(request)
    except RequestRejected as exc:
        return page("error.html", caller, status=exc.status_code, message=exc.message, nav="settings")
    if not csrf.valid(request, form):
        return page("error.html", caller, status=403, message=CSRF_REFUSED, nav="settings")
    at = await place(request, caller, board)
    return missing(caller) if at is None else (form, at)


@router.post("/ui/settings/{org}")
@router.post("/ui/settings/{org}/squads/{squad}")
@router.post("/ui/settings/{org}/keys/{key}")
async def settings_post(request: Request, caller: Viewer, board: Board) -> Response:
    """`step=review`: the diff of the form's change (refusals next to their fields);
    `step=confirm`: the reviewed change saved, then the form again (303). 403 without the CSRF token."""
    checked = await checked_post(request, caller, board)
    if isinstance(checked, Response):
        return checked
    form, at = checked
    try:
        if form.get("step") == "confirm":
            return await _confirm(request, caller, board, at.doc, at.org, at.scope, form)
        return await _review(request, caller, board, at.doc, at.org, at.scope, form, at.current)
    except GatewayUnavailable as exc:
        return page("error.html", caller, status=503, message=str(exc), nav="settings")


def refused(exc: RequestRejected | AdminError) -> tuple[int, dict[str, str]]:
    """An admin refusal as the form's status and error by field (the admin API's own words)."""
    refusal = rejected(exc) if isinstance(exc, AdminError) else exc
    return refusal.status_code, {field_of(refusal.param) or "": refusal.message}


async def _review(
    request: Request,
    caller: Caller,
    board: Board,
    doc: OrgDoc,
    org: str,
    scope: Scope,
    form: dict[str, str],
    current: ScopeSettings,
) -> Response:
    """The change the form asks for, checked as a save would be, shown as a diff with a confirm form."""
    values = {f.name: form.get(f.name, "") for f in FIELDS}
    try:
        patch = to_patch(form, current)
    except FormError as exc:
        return form_page(request, board, caller, doc, org, scope, values, status=400, errors={exc.name: exc.message})
    if not patch:
        return form_page(request, board, caller, doc, org, scope, values, notice="Nothing to change.")
    raw = _json.encode(patch)
    api = board.access
    try:
        before, after, clamps = await api.preview_as(caller, org, settings_edit(api, caller, scope, raw, True))
    except (RequestRejected, AdminError) as exc:
        status, errors = refused(exc)
        return form_page(request, board, caller, doc, org, scope, values, status=status, errors=errors)
    old = scope_settings(before, scope)
    changes = diff(old, scope_settings(after, scope)) + _ceiling_changes(before, after, scope)
    if not changes:
        return form_page(request, board, caller, doc, org, scope, values, notice="Nothing to change.")
    return page(
        "settings_review.html",
        caller,
        nav="settings",
        org=org,
        scope=scope,
        url=_url(org, scope),
        changes=changes,
        clamps=clamps_view(clamps),
        patch=raw.decode(),
        expect=_json.encode(old).decode(),
        csrf=csrf.of_request(request),
    )


def _ceiling_changes(before: OrgDoc, after: OrgDoc, scope: Scope) -> list[Change]:
    """The operator ceiling at `scope` a save changes (only the operator key's writes do)."""
    path = scope_path(scope)
    old, new = ceilings_view(before).get(path), ceilings_view(after).get(path)
    if old == new:
        return []
    return [Change(path=f"operator ceiling ({path})", old=_shown(old), new=_shown(new))]


def _shown(ceiling: dict[str, Any] | None) -> str:
    return "" if ceiling is None else _json.encode(ceiling).decode()


async def _confirm(
    request: Request, caller: Caller, board: Board, doc: OrgDoc, org: str, scope: Scope, form: dict[str, str]
) -> Response:
    """Save the reviewed change (the admin API's edit, compare-and-set against the reviewed
    settings), record it in the audit log and go back to the form (303); a refusal: the form again."""
    raw = form.get("patch", "").encode()
    fields = _patch_fields(raw)
    try:
        expect = msgspec.json.decode(form.get("expect", "").encode(), type=ScopeSettings)
    except msgspec.DecodeError:  # a ValidationError too
        return page("error.html", caller, status=400, message="The review is missing; review the change again.")
    api = board.access
    try:
        await api.write_as(caller, org, settings_edit(api, caller, scope, raw, True, expect=expect))
    except (RequestRejected, AdminError) as exc:
        status, errors = refused(exc)
        await _audit(request, caller, org, scope, fields, status)
        fresh = await _doc(board, caller, org) or doc
        values = form_values(scope_settings(fresh, scope)) if _has(fresh, scope) else {}
        return form_page(request, board, caller, fresh, org, scope, values, status=status, errors=errors)
    await _audit(request, caller, org, scope, fields, 200)  # the admin API's PATCH answers 200
    saved = quote(",".join(fields), safe=",")
    return RedirectResponse(f"{_url(org, scope)}?saved={saved}", status_code=303, headers=SECURITY_HEADERS)


def _has(doc: OrgDoc, scope: Scope) -> bool:
    kind, name = scope
    return kind == "org" or name in (doc.squads if kind == "squad" else doc.keys)


def _patch_fields(raw: bytes) -> tuple[str, ...]:
    """The setting names of a patch, sorted (the audit entry's `fields`)."""
    try:
        data: Any = msgspec.json.decode(raw or b"null")
    except msgspec.DecodeError:
        return ()
    return tuple(sorted(str(k) for k in data)) if isinstance(data, dict) else ()


async def _audit(
    request: Request, caller: Caller, org: str, scope: Scope, fields: tuple[str, ...], status: int
) -> None:
    """The save's audit entry, as the admin API's `PATCH` of the scope's settings records it."""
    await record_write(request, caller, org, "PATCH", _admin_path(org, scope), fields, status)


async def record_write(
    request: Request, caller: Caller, org: str, method: str, path: str, fields: tuple[str, ...], status: int
) -> None:
    """A dashboard write's audit entry, as the admin API's `method` of `path` (`/admin/v1/...`)
    records it (`turnout_ingress.admin.audit`): `who` the session's key, the body's field names."""
    recorder: AuditRecorder | None = getattr(request.app.state, "audit_recorder", None)
    if recorder is None:
        return
    who = "operator" if caller.operator else f"key {caller.org}/{caller.key}"
    entry_org = org if caller.operator and status < 400 else caller.org
    await recorder.record(AuditEntry(who=who, org=entry_org, method=method, path=path, fields=fields, status=status))
