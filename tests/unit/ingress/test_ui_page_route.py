"""The dashboard pages' route class: nobody logged in goes to the login form, a store down is a 503 page."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.testclient import TestClient
from starlette.responses import Response

from turnout.state.errors import StateUnavailable
from turnout_ingress.ui.deps import UNREACHABLE, LoginNeeded, PageRoute
from turnout_ingress.ui.render import SECURITY_HEADERS

router = APIRouter(route_class=PageRoute, include_in_schema=False)


@router.get("/ui/nobody")
async def nobody() -> Response:
    raise LoginNeeded


@router.get("/ui/down")
async def down(request: Request) -> Response:
    raise StateUnavailable("down")


@router.get("/ui/fine")
async def fine() -> Response:
    return Response("ok")


def _client() -> TestClient:
    app = FastAPI()
    app.include_router(router)
    return TestClient(app, follow_redirects=False)


def test_a_page_nobody_is_logged_in_for_redirects_to_the_login_form_clearing_the_cookie() -> None:
    r = _client().get("/ui/nobody")
    assert (r.status_code, r.headers["location"]) == (303, "/ui/login")
    assert "turnout_ui=" in r.headers["set-cookie"] and "Max-Age=0" in r.headers["set-cookie"]
    assert r.headers["content-security-policy"] == SECURITY_HEADERS["content-security-policy"]


def test_a_page_whose_store_is_unreachable_is_the_error_page_503() -> None:
    r = _client().get("/ui/down")
    assert r.status_code == 503 and UNREACHABLE in r.text
    assert r.headers["cache-control"] == "no-store"


def test_a_page_that_answers_is_answered_as_is() -> None:
    r = _client().get("/ui/fine")
    assert (r.status_code, r.text) == (200, "ok")
    assert "/ui/fine" not in _client().get("/openapi.json").text
