"""The dashboard's login cookie rules: cross-site POSTs refused, the cookie's attributes."""

from __future__ import annotations

import pytest
from starlette.requests import Request
from starlette.responses import Response

from turnout_ingress.ui import session


def _request(headers: dict[str, str], scheme: str = "http") -> Request:
    return Request(
        {
            "type": "http",
            "method": "POST",
            "path": "/ui/login",
            "scheme": scheme,
            "query_string": b"",
            "server": ("gw.example", 8080),
            "headers": [(b"host", b"gw.example:8080"), *((k.encode(), v.encode()) for k, v in headers.items())],
        }
    )


@pytest.mark.parametrize(
    ("headers", "allowed"),
    [
        ({}, True),
        ({"origin": "http://gw.example:8080"}, True),
        ({"origin": "https://gw.example:8080"}, False),
        ({"origin": "http://evil.example"}, False),
        ({"origin": "null"}, False),
        ({"referer": "http://gw.example:8080/ui/login"}, True),
        ({"referer": "http://evil.example/ui/login"}, False),
    ],
    ids=["none", "same", "other-scheme", "other-host", "null", "referer-same", "referer-other"],
)
def test_login_post_is_refused_from_another_origin(headers: dict[str, str], allowed: bool) -> None:
    assert session.same_origin(_request(headers)) is allowed


@pytest.mark.parametrize(("scheme", "secure"), [("http", False), ("https", True)])
def test_login_cookie_is_httponly_strict_and_scoped_to_ui(scheme: str, secure: bool) -> None:
    response = Response()
    session.log_in(response, _request({}, scheme), "tk-admin-0000000001")
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
    assert ("Secure" in cookie) is secure
