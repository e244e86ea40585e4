"""The dashboard's entry: the login form, login and logout; sessions opened and ended, failed logins
throttled, each audited.

Owns: `GET /ui` (to Activity), `GET /ui/login` (the form), `POST /ui/login` —
refused cross-site (403), throttled while the client or the tried key's digest is at `LOGIN_FAILS_MAX` failed logins in
the current window (429 with `Retry-After`, `turnout.state.ui_sessions`),
else the key checked with the admin API's rules (401 unknown, 403-like 401
for a key that is not an admin's, 503 while keys cannot be checked), a
failure counted, a success answered with a new session's cookie — and
`POST /ui/logout`, which ends the session in Redis (the old cookie then
leads to the login page). Every login, failed login and logout is an entry
of the audit log (`turnout.state.audit_log`: path `/ui/login` or
`/ui/logout`, `who` the key's holder when known, never the key).
Must not import: the UI's page routes.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from turnout.errors import GatewayUnavailable, RequestRejected
from turnout.state.audit_log import AuditEntry
from turnout.state.errors import StateUnavailable
from turnout.state.ui_sessions import digest, throttle_names
from turnout_ingress.admin.access import Caller
from turnout_ingress.admin.audit import AuditRecorder
from turnout_ingress.ui import session
from turnout_ingress.ui.deps import Board
from turnout_ingress.ui.render import SECURITY_HEADERS, page, to_login


async def audit(request: Request, who: str, org: str | None, status: int) -> None:
    """One audit entry for a dashboard login or logout (`AuditRecorder`: an unknown key's failure is
    counted and sampled like an unauthenticated admin write; a Redis failure is logged)."""
    recorder: AuditRecorder | None = getattr(request.app.state, "audit_recorder", None)
    if recorder is not None:
        await recorder.record(AuditEntry(who=who, org=org, method="POST", path=request.url.path, status=status))


def client_of(request: Request) -> str:
    """The address a login comes from (the throttle's per-client counter)."""
    return request.client.host if request.client is not None else "unknown"


router = APIRouter(include_in_schema=False)


def unavailable() -> HTMLResponse:
    """The login form again (503): keys cannot be checked while Redis is unreachable."""
    return page("login.html", None, status=503, error="Keys cannot be checked yet (Redis unreachable); retry shortly.")


@router.get("/ui")
@router.get("/ui/")  # typed by hand in a browser; the app does not redirect slashes
async def ui_root() -> Response:
    """The dashboard's first page: Activity (303)."""
    return RedirectResponse("/ui/activity", status_code=303)


@router.get("/ui/login")
async def login_form(request: Request, board: Board) -> Response:
    """The login form; Activity (303) for an admin already logged in."""
    if await session.current(request, board.access, board.sessions) is not None:
        return RedirectResponse("/ui/activity", status_code=303)
    return page("login.html", None, error=None)


@router.post("/ui/login")
async def login(request: Request, board: Board) -> Response:
    """Open a session for the form's admin `key` (see the module doc), answered with its cookie
    and a redirect to Activity (303); a refusal is the login form again, saying why."""
    if not session.same_origin(request):
        return page("login.html", None, status=403, error="Cross-site login refused.")
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    key = (form.get("key") or [""])[0].strip()
    names = throttle_names(client_of(request), digest(key))
    sessions = board.sessions
    try:
        wait_s = await sessions.wait_s(names)
    except StateUnavailable:
        return unavailable()
    if wait_s:
        await audit(request, "unauthenticated", None, 429)
        refused = page("login.html", None, status=429, error=f"Too many failed logins; retry in {wait_s} s.")
        refused.headers["retry-after"] = str(wait_s)
        return refused
    who: dict[str, Any] = {"who": "unauthenticated"}
    try:
        caller: Caller = board.access.identify(key, on_who=lambda name: who.update(who=name))
    except RequestRejected as exc:
        try:
            await sessions.failed(names)
        except StateUnavailable:
            return unavailable()
        await audit(request, who["who"], None, 401)
        message = "That key is not an admin key." if exc.status_code == 403 else "Unknown key."
        return page("login.html", None, status=401, error=message)
    except GatewayUnavailable:
        return unavailable()
    try:
        session_id = await sessions.open(session.record_of(key, caller))
    except StateUnavailable:
        return unavailable()
    await audit(request, who["who"], caller.org, 303)
    response = RedirectResponse("/ui/activity", status_code=303, headers=SECURITY_HEADERS)
    session.log_in(response, request, session_id)
    return response


@router.post("/ui/logout")
async def logout(request: Request, board: Board) -> Response:
    """End the cookie's session (refused cross-site: 403) and go back to the login form."""
    if not session.same_origin(request):
        return Response(status_code=403)
    session_id = request.cookies.get(session.COOKIE, "")
    caller = await session.current(request, board.access, board.sessions)
    if session_id:
        try:
            await board.sessions.end(session_id)
        except StateUnavailable:
            return page("error.html", caller, status=503, message="Cannot log out right now; retry shortly.")
    if caller is not None:
        who = "operator" if caller.operator else f"key {caller.org}/{caller.key}"
        await audit(request, who, caller.org, 303)
    return to_login()
