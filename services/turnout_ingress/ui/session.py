"""Who is looking at the dashboard: the admin key kept in a cookie.

Owns: the login cookie (`turnout_ui`: the admin key itself, `HttpOnly`,
`SameSite=Strict`, `Path=/ui`, `Secure` behind https), identifying its
holder on every page with the admin API's rules
(`turnout_ingress.admin.access`: operator key or an org's admin key), and
refusing a cross-site POST. The key is re-checked on every request, so a
revoked admin key is logged out at once; it never appears in a URL or a
page.
Must not import: the UI's routes.

CSRF: every dashboard route is a GET that changes nothing, except login and
logout; the cookie is `SameSite=Strict` and those two POSTs are refused when
their `Origin` (or, without one, `Referer`) names another site.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from turnout.errors import GatewayUnavailable, RequestRejected
from turnout_ingress.admin.access import AdminAPI, Caller

COOKIE = "turnout_ui"
MAX_AGE_S = 8 * 3600
"""The login lasts a working day."""


def current(request: Request, access: AdminAPI) -> Caller | None:
    """The caller the cookie identifies, or None (no cookie, or a key no longer valid or not an admin's)."""
    token = request.cookies.get(COOKIE, "")
    if not token:
        return None
    try:
        return access.identify(token)
    except (RequestRejected, GatewayUnavailable):  # the login page then says which
        return None


def log_in(response: Response, request: Request, key: str) -> None:
    """Set the login cookie on `response`."""
    response.set_cookie(
        COOKIE,
        key,
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
