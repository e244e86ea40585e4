"""Operator routes of the ingress: provider health and Prometheus metrics.

Owns: `GET /v1/health/providers` and `GET /metrics`. Provider health is
scoped to its caller: the operator key sees every (provider, model) pair
with its `last_error`; an org's admin key sees only the pairs its org can
use (catalog offers with a platform key or the org's own key, and the org's
custom endpoint targets), with `last_error` only on its own custom endpoint
targets (a shared pair's last error may come from another org's attempt).
Errors are scrubbed before the breaker stores them (`turnout.scrub`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec
from fastapi import FastAPI, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from turnout.core.breaker import calls, ramp_share, reopen_in_s, resting_for_s, score, state_at
from turnout.observability.metrics import (
    BREAKER_STATE_VALUE,
    CONTENT_TYPE,
    OTHER,
    Metrics,
    status_class,
    target_label,
)
from turnout.observability.metrics_auth import REFUSAL, bearer_ok
from turnout.state.server import queue_depth
from turnout_ingress.admin.access import AdminAPI
from turnout_ingress.admin.audit import ADMIN_PREFIX
from turnout_ingress.errors import JSON
from turnout_ingress.guard.door import PUBLIC_ROUTES, route_label

if TYPE_CHECKING:
    from turnout_ingress.state import IngressState

_json = msgspec.json.Encoder()


def _targets(state: IngressState) -> list[tuple[str, str, str]]:
    """(target key, provider, catalog model) for every offer in the catalog."""
    seen: dict[str, tuple[str, str, str]] = {}
    for model, targets in state.catalog.models.items():
        for t in targets:
            seen.setdefault(t.key, (t.key, t.provider, model))
    return list(seen.values())


def _org_targets(state: IngressState, org: str) -> tuple[list[tuple[str, str, str]], frozenset[str]]:
    """The pairs `org` can use and, of those, its own (custom endpoint) pairs."""
    tenant = state.keyring.credentials(org)
    own = tenant.own_providers if tenant is not None else frozenset()
    shared = {name for name, p in state.catalog.providers.items() if p.api_key}
    usable = [t for t in _targets(state) if t[1] in shared or t[1] in own]
    custom = [(t.key, t.provider, t.catalog_model) for t in state.keyring.custom_targets(org)]
    return usable + custom, frozenset(t[0] for t in custom)


async def provider_rows(state: IngressState, org: str | None) -> tuple[list[dict[str, Any]], bool, float]:
    """The health rows its caller may see, whether the breaker store was degraded, and its clock.

    Args:
        state: the ingress's objects.
        org: None for the operator (every pair, each with its `last_error`);
            an org id for that org's admin (only the pairs it can use, with
            `last_error` only on its own custom endpoint targets).

    Returns:
        One dict per target: `target`, `provider`, `model`, `catalog_model`,
        `state` (closed / open / half_open), `score` (0..1),
        `calls` (decayed count), `consecutive_failures`, `trips`,
        `trip_rule`, `cooldown_remaining_s`, `resting_s`,
        `slow_start_share` (0..1), `sole`, `last_error` (scrubbed or None);
        then the degraded flag and the breaker store's clock (epoch s).
    """
    if org is None:
        targets, errors_of = _targets(state), None
    else:
        targets, errors_of = _org_targets(state, org)
    view = await state.breakers.reads.view([t[0] for t in targets])
    now = view.store_now()
    rows = []
    settings = state.breakers.settings
    for key, provider, model in targets:
        snap = view.snapshot(key)
        rows.append(
            {
                "target": key,
                "provider": provider,
                "model": key.split("/", 1)[1],
                "catalog_model": model,
                "state": str(state_at(snap, now)),
                "score": round(score(snap, now, settings), 4),
                "calls": round(calls(snap, now, settings), 2),
                "consecutive_failures": snap.run,
                "trips": snap.trips,
                "trip_rule": snap.trip_rule or None,
                "cooldown_remaining_s": round(reopen_in_s(snap, now), 3),
                "resting_s": round(resting_for_s(snap, now), 3),
                "slow_start_share": round(ramp_share(snap, now, settings), 3),
                "sole": key in state.catalog.sole_targets,
                "last_error": (state.router.scrubber.text(snap.last_error) or None)
                if errors_of is None or key in errors_of
                else None,
            }
        )
    return rows, view.degraded, now


class RouteCounts:
    """`turnout_requests_total` by route and status: the `route` label is the path of a
    public route (`PUBLIC_ROUTES`), "admin" for any path under `/admin/v1/` (the admin API, one
    label whatever the org, key or id in the path), the family of a well-known provider API
    route the gateway does not serve (`/v1/images`), else "other" (`door.route_label`).
    The same label keys the end-to-end duration and time-to-first-token histograms (`answer`).

    Args:
        metrics: where the counts and histograms go.
        clock: monotonic seconds (injected in tests).
    """

    def __init__(self, metrics: Metrics, clock: Callable[[], float] = time.perf_counter) -> None:
        self._metrics = metrics
        self.clock = clock
        self._children: dict[tuple[str, int], Any] = {}  # (public path, status) -> its counter child
        self._durations: dict[tuple[str, int], Any] = {}  # (public path, status) -> its histogram child

    def route(self, path: str) -> str:
        """The `route` label of a request for `path`."""
        return path if path in PUBLIC_ROUTES else route_label(path, PUBLIC_ROUTES, ADMIN_PREFIX)

    def count(self, path: str, status: int) -> None:
        """Count one answer of `status` (HTTP status) to a request for `path`."""
        child = self._children.get((path, status))
        if child is None:
            child = self._metrics.requests.labels(route=self.route(path), status=str(status))
            if path in PUBLIC_ROUTES:  # kept only for the closed set of routes, keyed by path: the cache stays bounded
                self._children[(path, status)] = child
        child.inc()

    def answered(self, path: str, status: int, duration_s: float) -> None:
        """Observe one answer's end-to-end duration (s, arrival to last byte)."""
        child = self._durations.get((path, status))
        if child is None:
            labels = {"route": self.route(path), "status_class": status_class(status)}
            child = self._metrics.request_duration.labels(**labels)
            if path in PUBLIC_ROUTES:  # bounded, as `count`'s
                self._durations[(path, status)] = child
        child.observe(duration_s)

    def first_token(self, path: str, provider: str, seconds: float) -> None:
        """Observe one stream's time to first token (s, arrival to its first content sent)."""
        m = self._metrics
        m.bounded.child(m.time_to_first_token, route=self.route(path), provider=provider).observe(seconds)

    def answer(self, path: str, send: Send) -> Answer:
        """An `Answer` to a request for `path` that arrived now, sending through `send`."""
        return Answer(self, path, send)


def _stream_provider(message: Message) -> str | None:
    """The serving provider (`x-turnout-provider`) of a `200 text/event-stream` response start, else None."""
    if message["status"] != 200:
        return None
    headers: dict[bytes, bytes] = dict(message.get("headers", ()))
    if not headers.get(b"content-type", b"").startswith(b"text/event-stream"):
        return None
    provider = headers.get(b"x-turnout-provider", OTHER.encode())
    return provider.decode("latin-1")


class Answer:
    """One request's answer, counted and timed as it is sent (`RouteCounts`): `send` is the ASGI
    send that counts its start, observes a stream's first content (time to first token) and
    its last byte (end-to-end duration); call `close` once the application returned or raised."""

    __slots__ = ("_arrived", "_counts", "_done", "_path", "_send", "_stream", "status")

    def __init__(self, counts: RouteCounts, path: str, send: Send) -> None:
        self._counts, self._path, self._send = counts, path, send
        self._arrived = counts.clock()
        self.status: int | None = None  # set at the response start
        self._stream: str | None = None  # the serving provider until a stream's first content is sent
        self._done = False

    async def send(self, message: Message) -> None:
        """Send `message` (ASGI), counting and timing the answer."""
        counts = self._counts
        if message["type"] == "http.response.start":
            self.status, self._stream = message["status"], _stream_provider(message)
            counts.count(self._path, message["status"])
        elif message["type"] == "http.response.body" and self.status is not None:
            if self._stream is not None and message.get("body"):
                counts.first_token(self._path, self._stream, counts.clock() - self._arrived)
                self._stream = None
            if not message.get("more_body", False) and not self._done:
                self._done = True
                await self._send(message)
                counts.answered(self._path, self.status, counts.clock() - self._arrived)
                return
        await self._send(message)

    def close(self) -> None:
        """Observe the duration of an answer started but not finished (the client left, the body failed)."""
        if self.status is not None and not self._done:
            self._done = True
            self._counts.answered(self._path, self.status, self._counts.clock() - self._arrived)


class RequestCounter:
    """Pure ASGI middleware: count answered HTTP requests by route and status, time them from
    arrival to the last byte sent, and time a stream's first content (`RouteCounts.answer`).

    Args:
        app: the wrapped application.
        metrics: where the counts and histograms go.
        clock: monotonic seconds (injected in tests).
    """

    def __init__(self, app: ASGIApp, metrics: Metrics, clock: Callable[[], float] = time.perf_counter) -> None:
        self._app = app
        self._counts = RouteCounts(metrics, clock)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        answer = self._counts.answer(scope.get("path", ""), send)
        try:
            await self._app(scope, receive, answer.send)
        finally:
            answer.close()


def install(app: FastAPI, state: IngressState) -> None:
    """Register the operator routes and the request counter."""
    app.add_middleware(RequestCounter, metrics=state.metrics)
    access = AdminAPI(state.keyring, state.settings.operator_key)

    @app.get("/v1/health/providers")
    async def providers(request: Request) -> Response:
        caller = access.caller(request)  # 401 unknown key, 403 not an admin key
        rows, degraded, _ = await provider_rows(state, caller.org)
        body = {"object": "list", "data": rows, "store_degraded": degraded}
        return Response(_json.encode(body), media_type=JSON)

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        token = state.settings.metrics_token
        if token is not None and not bearer_ok(request.headers.get("authorization", ""), token):
            return Response(REFUSAL, status_code=401, media_type=JSON, headers={"www-authenticate": "Bearer"})
        targets = _targets(state)
        view = await state.breakers.reads.view([t[0] for t in targets])
        now = view.store_now()
        for key, _, _ in targets:
            value = BREAKER_STATE_VALUE[state_at(view.snapshot(key), now)]
            state.metrics.bounded.child(state.metrics.breaker_state, target=target_label(key)).set(value)
        depth = await queue_depth(state.redis)
        if depth is not None:
            state.metrics.queue_depth.set(depth)
        return Response(state.metrics.exposition(), media_type=CONTENT_TYPE)
