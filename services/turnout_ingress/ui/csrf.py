"""The dashboard's CSRF tokens: one per login session, put in every form that changes something and
checked on the server before anything is read from the form.

Owns: `token` (a session's token: HMAC-SHA256 keyed with the session id, which only the login cookie
holds, so no other site can compute it; Redis keeps the id's plain SHA-256, from which the token
cannot be made either) and `valid` (a POST's `csrf` field against its cookie's session, compared in
constant time). The `SameSite=Strict` cookie and the `Origin` check (`session.same_origin`) stay
as well; the token is what a state-changing form is refused without (403).
Must not import: the UI's routes.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from starlette.requests import Request

from turnout_ingress.ui import session

FIELD = "csrf"
"""The form field that carries the token."""
_PURPOSE = b"turnout-ui-csrf-v1"


def token(session_id: str) -> str:
    """The CSRF token of the session `session_id` (64 hex characters)."""
    return hmac.new(session_id.encode("utf-8"), _PURPOSE, hashlib.sha256).hexdigest()


def of_request(request: Request) -> str:
    """The token of the request's login session (`""` without a cookie)."""
    session_id = request.cookies.get(session.COOKIE, "")
    return token(session_id) if session_id else ""


def valid(request: Request, form: Mapping[str, str]) -> bool:
    """True when the form's `csrf` field is its cookie's session's token (and the POST comes from
    a page of this host, `session.same_origin`)."""
    expected = of_request(request)
    sent = form.get(FIELD, "")
    return (
        bool(expected)
        and hmac.compare_digest(sent.encode("utf-8"), expected.encode("utf-8"))
        and session.same_origin(request)
    )
