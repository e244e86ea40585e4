"""Who is looking at the dashboard: a server-side session behind a random cookie (#40 item 7).

Owns: the login cookie (`turnout_ui`: a random session id, `HttpOnly`,
`SameSite=Strict`, `Path=/ui`, `Secure` behind https) and identifying its
holder on every page: the session (`turnout.state.ui_sessions`, Redis keeps
the id's hash with the admin key's prefix and digest, never the key) is read
and its key re-checked with the admin API's rules
(`turnout_ingress.admin.access`: operator key or an org's admin key), so a
revoked key's session ends at its next request and a logged-out one at
once; and refusing a cross-site POST. The key never appears in a cookie, a
URL or a page.
Must not import: the UI's routes.

CSRF: every dashboard route is a GET that changes nothing, except login,
logout and the settings forms; the cookie is `SameSite=Strict` and those POSTs
are refused when their `Origin` (or, without one, `Referer`) names another
site; the settings forms also carry the session's token (`ui.csrf`).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from turnout.errors import GatewayUnavailable, RequestRejected
from turnout.state.errors import StateUnavailable
from turnout.state.ui_sessions import SESSION_TTL_S, SessionRecord, UiSessions
from turnout.tenancy.orgs import hash_token, lookup_prefix
from turnout_ingress.admin.access import AdminAPI, Caller

COOKIE = "turnout_ui"
MAX_AGE_S = SESSION_TTL_S
"""The login lasts a working day."""


def record_of(key: str, caller: Caller) -> SessionRecord:
    """What a session keeps of the admin `key` that `caller` holds: its lookup prefix (`""` for the
    operator key) and its SHA-256."""
    return SessionRecord(prefix="" if caller.operator else lookup_prefix(key), digest=hash_token(key))


async def current(request: Request, access: AdminAPI, sessions: UiSessions) -> Caller | None:
    """The caller the cookie's session identifies, or None (no cookie, an ended or expired session,
    a key no longer valid or not an admin's, or Redis unreachable: the login page then says which)."""
    session_id = request.cookies.get(COOKIE, "")
    if not session_id:
        return None
    try:
        record = await sessions.read(session_id)
    except StateUnavailable:
        return None
    if record is None:
        return None
    try:
        return access.held(record.prefix, record.digest)
    except (RequestRejected, GatewayUnavailable):
        return None


def log_in(response: Response, request: Request, session_id: str) -> None:
    """Set the login cookie (the session id) on `response`."""
    response.set_cookie(
        COOKIE,
        session_id,
        max_age=MAX_AGE_S,
        path="/ui",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def log_out(response: Response) -> None:
    """Clear the login cookie on `response`."""
    response.delete_cookie(COOKIE, path="/ui", httponly=True, samesite="strict")


def same_origin(request: Request) -> bool:
    """True when a POST comes from a page of this host (its `Origin`, else `Referer`; neither: True)."""
    source = request.headers.get("origin") or request.headers.get("referer")
    if not source or source == "null":
        return source != "null"
    parts = urlsplit(source)
    return f"{parts.scheme}://{parts.netloc}" == f"{request.url.scheme}://{request.url.netloc}"
