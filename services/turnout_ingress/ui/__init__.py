"""The operator dashboard under `/ui`: server-rendered pages over what the gateway recorded.

Owns: the `/ui` routes — login and logout, Activity (requests, live), one
request's attempts, Providers (breaker state and health, live), Spend,
the record export for the logged-in admin, and Settings (a scope's routing
settings, and a key's squad, admin flag, expiry and revocation and an org's provider keys, edited through the admin API's own edits, `pages.settings`, `pages.settings_keys`) — rendered with Jinja2 templates
(`templates/`) and one stylesheet and script (`static/`), all served by the
ingress: no build step, nothing loaded from elsewhere (the pages' Content
Security Policy allows only this origin).
Must not import: the worker.

Each page is one module of `pages/` with a module-level `APIRouter` (the login form,
login and logout: `login`); what the routes share comes through FastAPI dependencies
(`deps`: the app's `Dashboard`, the logged-in viewer, the pages' route class).
Adding a page: one module and one line in `ROUTERS`.

The pages are HTML for people, not API: none is in the OpenAPI schema.

Scope follows the admin API: the operator key sees every org; an org's
admin key sees only its org's requests and spend, and on Providers exactly
the rows `GET /v1/health/providers` shows it (`ops_routes.provider_rows`).
No page shows a secret: records hold no key material, errors are scrubbed
before the breaker stores them, and the login key stays in its cookie.

Environment: `TURNOUT_UI_TRACE_URL`, a URL with `{request_id}` (e.g. a
tracing UI's search for the span attribute `turnout.request_id`): the
request page links to it when set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter, FastAPI
from starlette.staticfiles import StaticFiles

from turnout_ingress.ui import login
from turnout_ingress.ui.deps import Dashboard
from turnout_ingress.ui.pages import activity, export, providers, request_detail, settings, settings_keys, spend
from turnout_ingress.ui.render import HERE

if TYPE_CHECKING:
    from turnout_ingress.state import IngressState

TRACE_URL_ENV = "TURNOUT_UI_TRACE_URL"  # read into `turnout.settings.Settings.trace_url`

ROUTERS: tuple[APIRouter, ...] = (
    login.router,
    activity.router,
    request_detail.router,
    providers.router,
    spend.router,
    export.router,
    settings.router,
    settings_keys.router,
)
"""Every dashboard router, included in this order."""


def install(app: FastAPI, state: IngressState) -> None:
    """Put the dashboard on `app`: its shared objects (operator key and trace link from
    `state.settings`), its static files and its routers."""
    app.state.dashboard = Dashboard(state)
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="ui-static")
    for router in ROUTERS:
        app.include_router(router)
