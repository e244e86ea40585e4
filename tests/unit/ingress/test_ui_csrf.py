"""The dashboard's CSRF token (#45 item 8): one per session, unguessable without the session's cookie,
checked in constant time with the request's origin."""

from __future__ import annotations

import hashlib

import pytest
from starlette.requests import Request

from turnout_ingress.ui import csrf, session


def _request(cookie: str | None, origin: str | None = None) -> Request:
    headers = [(b"host", b"gw.example:8080")]
    if cookie is not None:
        headers.append((b"cookie", f"{session.COOKIE}={cookie}".encode()))
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    return Request(
        {
            "type": "http",
            "method": "POST",
            "path": "/ui/settings/acme",
            "scheme": "http",
            "query_string": b"",
            "server": ("gw.example", 8080),
            "headers": headers,
        }
    )


def test_a_token_is_per_session_and_not_the_hash_redis_keeps() -> None:
    one, two = csrf.token("session-one"), csrf.token("session-two")
    assert len(one) == 64 and one != two and one == csrf.token("session-one")
    assert one != hashlib.sha256(b"session-one").hexdigest()  # Redis keeps this one (`ui_sessions`)


@pytest.mark.parametrize(
    ("cookie", "sent", "origin", "ok"),
    [
        ("s1", csrf.token("s1"), None, True),
        ("s1", csrf.token("s1"), "http://gw.example:8080", True),
        ("s1", csrf.token("s1"), "https://evil.example", False),
        ("s1", csrf.token("s2"), None, False),
        ("s1", "", None, False),
        ("s1", None, None, False),
        (None, csrf.token(""), None, False),
        ("s1", "é" * 64, None, False),
    ],
)
def test_a_form_passes_with_its_sessions_token_only(
    cookie: str | None, sent: str | None, origin: str | None, ok: bool
) -> None:
    form = {} if sent is None else {csrf.FIELD: sent}
    assert csrf.valid(_request(cookie, origin), form) is ok
