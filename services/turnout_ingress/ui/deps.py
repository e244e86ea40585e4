"""FastAPI dependencies of the dashboard's routes: the app's dashboard objects and who is looking.

Owns: what every `/ui` route module asks FastAPI for (`Depends`), so a route module is
a plain module-level `APIRouter` with no closure over the app: `Board` (the app's
`Dashboard`, set by `turnout_ingress.ui.install`) and `Viewer` (the logged-in admin;
nobody: the page redirects to the login form), and `PageRoute`, the route class of the
pages, which answers those redirects and renders the 503 page while the records store
is unreachable.
Must not import: the UI's routes.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, Request
from fastapi.routing import APIRoute
from starlette.responses import Response

from turnout.state.errors import StateUnavailable
from turnout.state.ui_sessions import UiSessions
from turnout_ingress.admin.access import AdminAPI, Caller
from turnout_ingress.ui import session
from turnout_ingress.ui.figures import SpendTable
from turnout_ingress.ui.render import page, to_login

if TYPE_CHECKING:
    from turnout_ingress.state import IngressState
    from turnout_ingress.ui.series import Window


class Dashboard:
    """What the dashboard's routes share, one per app.

    Attributes:
        state: the ingress's objects (Redis, spend ledger, provider health).
        access: who may look (the admin API's rules: the operator key from
            `state.settings.operator_key`, or an org's admin key).
        sessions: the login sessions in Redis.
        trace_url: the request page's tracing link (`{request_id}` in it), or None.
        spend_cache: the Spend page's table per scope (an org, None: the operator's all).
        glance_cache: the charts' rows per (scope, window) (`turnout_ingress.ui.glance.read_window`).
    """

    def __init__(self, state: IngressState) -> None:
        self.state = state
        self.access = AdminAPI(state.keyring, state.settings.operator_key)
        self.sessions = UiSessions(state.redis)
        self.trace_url = state.settings.trace_url
        self.spend_cache: dict[str | None, SpendTable] = {}
        self.glance_cache: dict[tuple[str | None, str], Window] = {}


def dashboard(request: Request) -> Dashboard:
    """The app's `Dashboard` (one per app, built by `turnout_ingress.ui.install`)."""
    board: Dashboard = request.app.state.dashboard
    return board


Board = Annotated[Dashboard, Depends(dashboard)]


class LoginNeeded(Exception):
    """Nobody is logged in (no cookie, an ended session, a key no longer valid): the page
    answers a redirect to the login form (`PageRoute`)."""


async def viewer(request: Request, board: Board) -> Caller:
    """The logged-in admin the cookie's session identifies (kept on `request.state.ui_caller`
    for the 503 page).

    Raises:
        LoginNeeded: nobody is.
    """
    caller = await session.current(request, board.access, board.sessions)
    if caller is None:
        raise LoginNeeded
    request.state.ui_caller = caller
    return caller


Viewer = Annotated[Caller, Depends(viewer)]

UNREACHABLE = "The records store is unreachable right now; retry shortly."


class PageRoute(APIRoute):
    """The route of a dashboard page (FastAPI's custom route class): nobody logged in gets the
    redirect to the login form, a page whose store is unreachable (`StateUnavailable`) the
    error page (503) for its viewer."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler of this route, answering `LoginNeeded` and `StateUnavailable`."""
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except LoginNeeded:
                return to_login()
            except StateUnavailable:
                caller = getattr(request.state, "ui_caller", None)
                return page("error.html", caller, status=503, message=UNREACHABLE)

        return handle
