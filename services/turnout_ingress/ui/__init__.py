"""The operator dashboard under `/ui`: server-rendered pages over what the gateway recorded.

Owns: the `/ui` routes — login and logout, Activity (requests, live), one
request's attempts, Providers (breaker state and health, live), Spend, and
the record export for the logged-in admin — rendered with Jinja2 templates
(`templates/`) and one stylesheet and script (`static/`), all served by the
ingress: no build step, nothing loaded from elsewhere (the pages' Content
Security Policy allows only this origin).
Must not import: the worker.

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

import functools
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

import msgspec
from fastapi import FastAPI, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.staticfiles import StaticFiles

from turnout.errors import RequestRejected
from turnout.observability.records_export import iso_ts
from turnout.state.errors import StateUnavailable
from turnout.state.ui_sessions import UiSessions
from turnout_ingress.admin.access import AdminAPI, Caller
from turnout_ingress.admin.quote import quoted
from turnout_ingress.admin.records import MEDIA_TYPES, export_response
from turnout_ingress.admin.time_query import parse_range
from turnout_ingress.ops_routes import provider_rows
from turnout_ingress.ui import figures, reader, samples, session
from turnout_ingress.ui.activity import OUTCOMES, Filters, valid_cursor
from turnout_ingress.ui.login import install_login

if TYPE_CHECKING:
    import jinja2

    from turnout_ingress.state import IngressState

HERE = Path(__file__).parent
TRACE_URL_ENV = "TURNOUT_UI_TRACE_URL"  # read into `turnout.settings.Settings.trace_url`
TRAFFIC_WINDOW_S = 300.0
"""Providers: calls per minute and error classes over the last 5 minutes of records."""
TRAFFIC_SCAN_MAX = 50_000
SPEND_SCAN_MAX = 200_000
SPEND_CACHE_S = 30.0
"""Spend is computed at most once per this many seconds per scope (org, or the operator's all)."""
PAGE_SIZE = 50
Handler = Callable[[Request, Caller], Awaitable[Response]]
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; img-src 'self'; style-src 'self'; script-src 'self'; "
    "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


@functools.cache
def _environment() -> jinja2.Environment:
    """The templates' environment, built at the first page shown: an ingress whose dashboard
    nobody opens never loads Jinja2 (~2-3 MiB at rest)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["iso"] = lambda s: iso_ts(float(s))[:-5].replace("T", " ")
    env.filters["usd"] = lambda v: f"${float(v):,.6f}".rstrip("0").rstrip(".") if v else "$0"
    env.filters["ms"] = lambda v: f"{float(v):,.0f} ms" if float(v) >= 10 else f"{float(v):.1f} ms"
    env.filters["q"] = lambda params: urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return env


def _int(value: str | None, default: int, low: int, high: int) -> int:
    try:
        return max(low, min(high, int(value or default)))
    except ValueError:
        return default


class _Spend(msgspec.Struct, frozen=True, kw_only=True):
    table: list[figures.SpendRow]
    partial: bool
    records: int
    as_of_s: float
    read_ms: float
    made_monotonic_s: float


LAST_MAX_MIN = 60 * 24 * 30
"""The longest `last` window of the activity page (minutes: 30 days)."""


def _last_minutes(value: str | None) -> tuple[int, str | None]:
    """The activity page's `last` (minutes; 0 = no window), or 0 and an error message for the page
    when it is not a whole number of minutes from 1 to `LAST_MAX_MIN` (its select offers only such)."""
    if not value:
        return 0, None
    try:
        minutes = int(value)
    except ValueError:
        minutes = 0
    if 1 <= minutes <= LAST_MAX_MIN:
        return minutes, None
    return 0, f"`last` must be a whole number of minutes from 1 to {LAST_MAX_MIN}, not {quoted(value, 40)}."


def _outcome(value: str | None) -> tuple[str | None, str | None]:
    """The activity page's `outcome` filter (None = any), or None and an error message for the page
    when it is not one of `OUTCOMES` (its select offers only those)."""
    if not value:
        return None, None
    if value in OUTCOMES:
        return value, None
    return None, f"`outcome` must be {' or '.join(OUTCOMES)}, not {quoted(value, 40)}."


def _times(q: Mapping[str, str]) -> tuple[float | None, float | None, str | None]:
    """`since` and `until` of a query (epoch s, None when absent), or an error message for the page
    (a bad moment, or `since` later than `until`: `time_query.parse_range`)."""
    try:
        since_s, until_s = parse_range(q)
        return since_s, until_s, None
    except RequestRejected as exc:
        return None, None, exc.message


def install(app: FastAPI, state: IngressState) -> None:
    """Register the `/ui` routes and static files on the ingress app (operator key and trace
    link from `state.settings`)."""
    access = AdminAPI(state.keyring, state.settings.operator_key)
    trace_url = state.settings.trace_url
    spend_cache: dict[str | None, _Spend] = {}  # per scope (org, None: operator)
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="ui-static")

    def page(name: str, caller: Caller | None, status: int = 200, **context: Any) -> HTMLResponse:
        html = _environment().get_template(name).render(caller=caller, **context)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    sessions = UiSessions(state.redis)
    to_login = install_login(app, access, sessions, page, SECURITY_HEADERS)

    def view(path: str) -> Callable[[Handler], Handler]:
        """Register a GET page at `path` for a logged-in admin (else: to the login form)."""

        def register(handler: Handler) -> Handler:
            async def endpoint(request: Request) -> Response:
                caller = await session.current(request, access, sessions)
                if caller is None:
                    return to_login()
                try:
                    return await handler(request, caller)
                except StateUnavailable:
                    return page(
                        "error.html",
                        caller,
                        status=503,
                        message="The records store is unreachable right now; retry shortly.",
                    )

            app.add_api_route(path, endpoint, methods=["GET"], include_in_schema=False)
            return handler

        return register

    @app.get("/ui", include_in_schema=False)
    @app.get("/ui/", include_in_schema=False)  # typed by hand in a browser; the app does not redirect slashes
    async def ui_root() -> Response:
        return RedirectResponse("/ui/activity", status_code=303)

    @app.get("/ui/login", include_in_schema=False)
    async def login_form(request: Request) -> Response:
        if await session.current(request, access, sessions) is not None:
            return RedirectResponse("/ui/activity", status_code=303)
        return page("login.html", None, error=None)

    @view("/ui/activity")
    async def activity(request: Request, caller: Caller) -> Response:
        q = request.query_params
        since_s, until_s, error = _times(q)
        last_min, last_error = _last_minutes(q.get("last"))
        outcome, outcome_error = _outcome(q.get("outcome"))
        error = error or last_error or outcome_error
        if last_min and since_s is None:
            since_s = time.time() - last_min * 60
        filters = Filters(
            org=caller.org or q.get("org") or None,
            squad=q.get("squad") or None,
            key=q.get("key") or None,
            model=q.get("model") or None,
            provider=q.get("provider") or None,
            outcome=outcome,
            since_s=since_s,
            until_s=until_s,
        )
        if filters.org is not None:  # none of a deleted org of the same id: rows since this org's creation
            doc, _ = await access.store.load(filters.org)  # unreachable: the view's 503 (`register`)
            born_s = doc.created_s if doc is not None else 0.0
            if born_s and (filters.since_s is None or filters.since_s < born_s):
                filters = msgspec.structs.replace(filters, since_s=born_s)
        cursor = valid_cursor(q.get("cursor"))
        skip = frozenset(s for s in (q.get("skip") or "").split(",") if s)
        started = time.perf_counter()
        result = await reader.read_page(
            state.redis,
            scope_org=caller.org,
            filters=filters,
            cursor=cursor,
            skip=skip,
            size=_int(q.get("size"), PAGE_SIZE, 1, 200),
        )
        read_ms = (time.perf_counter() - started) * 1000.0
        params = {
            k: q.get(k) for k in ("org", "squad", "key", "model", "provider", "outcome", "since", "until", "last")
        }
        if caller.org is not None:
            params["org"] = None
        older = None
        if result.cursor is not None:
            older = {**params, "cursor": result.cursor, "skip": ",".join(result.skip)}
        name = "activity_rows.html" if q.get("fragment") else "activity.html"
        return page(
            name,
            caller,
            page=result,
            params=params,
            older=older,
            live=cursor is None,
            error=error,
            read_ms=read_ms,
            outcomes=OUTCOMES,
            export_formats=tuple(MEDIA_TYPES),
        )

    @view("/ui/requests/{request_id}")
    async def request_detail(request: Request, caller: Caller) -> Response:
        request_id = request.path_params["request_id"]
        if not (0 < len(request_id) <= 64 and request_id.isalnum()):
            return page("error.html", caller, status=404, message="No such request.")
        found = await reader.find_request(
            state.redis,
            request_id,
            scope_org=caller.org,
            at=valid_cursor(request.query_params.get("at")),
        )
        if found is None:
            return page("error.html", caller, status=404, message="No such request.")
        trace = trace_url.replace("{request_id}", quote(request_id)) if trace_url else None
        return page("request.html", caller, req=found, trace=trace)

    @view("/ui/providers")
    async def providers(request: Request, caller: Caller) -> Response:
        rows, degraded, now_s = await provider_rows(state, caller.org)
        targets = [r["target"] for r in rows]
        await samples.sample(state.redis, [(r["target"], r["score"]) for r in rows], now_s)
        rings = await samples.read(state.redis, targets)
        recent, partial = await reader.window_rows(
            state.redis,
            scope_org=caller.org,
            since_s=now_s - TRAFFIC_WINDOW_S,
            scan_max=TRAFFIC_SCAN_MAX,
        )
        traffic = figures.traffic(recent, TRAFFIC_WINDOW_S)
        lines = {t: samples.sparkline(rings.get(t, [])) for t in targets}
        name = "providers_rows.html" if request.query_params.get("fragment") else "providers.html"
        return page(
            name,
            caller,
            rows=rows,
            degraded=degraded,
            lines=lines,
            traffic=traffic,
            partial=partial,
            window_min=int(TRAFFIC_WINDOW_S // 60),
        )

    @view("/ui/spend")
    async def spend(request: Request, caller: Caller) -> Response:
        cached = spend_cache.get(caller.org)
        if cached is None or time.monotonic() - cached.made_monotonic_s > SPEND_CACHE_S:
            now_s = time.time()
            started = time.perf_counter()
            rows, partial = await reader.window_rows(
                state.redis,
                scope_org=caller.org,
                since_s=now_s - figures.PERIODS[-1][1],
                scan_max=SPEND_SCAN_MAX,
            )
            cached = _Spend(
                table=figures.spend(rows, now_s),
                partial=partial,
                records=len(rows),
                as_of_s=now_s,
                read_ms=(time.perf_counter() - started) * 1000.0,
                made_monotonic_s=time.monotonic(),
            )
            spend_cache[caller.org] = cached
        orgs = sorted(await access.store.org_versions()) if caller.operator else [caller.org or ""]
        docs = await access.store.load_many(orgs)
        ledger = [
            figures.ledger_rows(
                await state.obs.spend.read(org, "day", time.time()),
                await state.obs.spend.read(org, "month", time.time()),
                figures.scope_budgets(docs[org][0] if org in docs else None),
            )
            for org in orgs
        ]
        return page(
            "spend.html",
            caller,
            spend=cached,
            periods=[p[0] for p in figures.PERIODS],
            cache_s=int(SPEND_CACHE_S),
            ledger=[row for rows in ledger for row in rows],
        )

    @view("/ui/export")
    async def export(request: Request, caller: Caller) -> Response:
        q = request.query_params
        fmt = q.get("format", "jsonl")
        org = caller.org or q.get("org") or ""
        if fmt not in MEDIA_TYPES or not org:
            return page(
                "error.html",
                caller,
                status=400,
                message="Choose a format (jsonl or csv)" + ("" if org else " and an org") + " to export.",
            )
        since_s, until_s, error = _times(q)
        if error is not None:
            return page("error.html", caller, status=400, message=error)
        doc, _ = await access.store.load(org)  # unreachable: the view's 503 (`register`)
        if doc is None:  # the operator's pick (an org's admin exports its own org)
            return page("error.html", caller, status=404, message=f"No such org {quoted(org, 64)}.")
        return await export_response(state.redis, org, fmt, since_s, until_s, born_s=doc.created_s)
