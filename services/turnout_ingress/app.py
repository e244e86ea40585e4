"""The ingress: FastAPI app factory and the OpenAI-compatible routes.

Owns: composing the HTTP surface (the client surfaces through the front door,
`turnout_ingress.serving.front_door`; models, health; `HEAD` on every `GET` route,
`turnout_ingress.guard.methods`) and the per-process objects (config, catalog, key
ring, Redis client, job queue) built in the factory. It makes no upstream
call on the non-streaming path (SPEC §1).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec
from fastapi import FastAPI, Request
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from turnout.catalog.key_check import SealedKeysRefused
from turnout.config import Config
from turnout.errors import ConfigError
from turnout.observability.tracing import Telemetry
from turnout.runtime import freeze_startup_heap
from turnout.settings import Settings
from turnout.state.clients import async_client
from turnout.state.persistence import PersistenceRefused
from turnout.state.server import answers
from turnout_ingress import admin, errors, observability, ops_routes, ui
from turnout_ingress.admin.audit import ADMIN_PREFIX
from turnout_ingress.guard.door import PUBLIC_ROUTES, DoorRefusals, LogSampler
from turnout_ingress.guard.methods import HeadAsGet
from turnout_ingress.guard.refusal_writer import RefusalWriter
from turnout_ingress.hot_path import HOT_PATHS, IngressApp
from turnout_ingress.ops_routes import RouteCounts
from turnout_ingress.serving import front_door
from turnout_ingress.serving.validation import authenticate
from turnout_ingress.state import IngressState
from turnout_ingress.surfaces.messages import routes as messages_routes
from turnout_ingress.surfaces.messages.routes import anthropic_models, model_object
from turnout_ingress.surfaces.responses import routes as responses_routes

log = logging.getLogger("turnout.ingress")
_json = msgspec.json.Encoder()


async def _check_later(state: IngressState, check: Callable[[], Awaitable[object]]) -> None:
    """Await the AOF check of a Redis unreachable at start; a refusal stops the process (`create_app`)."""
    try:
        await check()
    except PersistenceRefused:  # logged by the check, as at start
        state.persistence_refused = True
        if state.stop_serving is not None:
            state.stop_serving()


def create_app(
    config: Config,
    *,
    redis_url: str,
    telemetry: Telemetry | None = None,
    settings: Settings | None = None,
    persistence_check: Callable[[], Awaitable[object]] | None = None,
) -> FastAPI:
    """Build the ingress app for `config`, talking to Redis at `redis_url` (telemetry: from `OTEL_*` by
    default; settings: read from the process environment by default).

    `persistence_check`, given when the start-up AOF check could not reach
    Redis, runs beside the app once it has started; should it raise
    `PersistenceRefused` (Redis then answered without AOF, not allowed), the
    app sets `persistence_refused` on its state and calls `stop_serving`.

    Raises:
        SettingsError: a malformed environment variable (named).
    """
    settings = settings if settings is not None else Settings.from_env(os.environ)
    redis = async_client(redis_url, socket_connect_timeout=0.5, socket_timeout=0.5, health_check_interval=10)
    listen_redis = async_client(redis_url, socket_connect_timeout=0.5, health_check_interval=10)
    state = IngressState(config, redis, listen_redis, settings, telemetry)
    refusals_max = config.raw.gateway.refusals_max_per_org
    rows = (  # door-refusal rows (`turnout_ingress.guard.refusal_writer`); None: not stored
        RefusalWriter(redis, max_len=refusals_max, dropped=state.metrics.refusal_rows_dropped)
        if refusals_max > 0
        else None
    )
    # redirect_slashes off: `/v1/models/` is a JSON 404 naming the route like any other unknown path, not a 307
    app = IngressApp(
        title="Turnout",
        version="0.1.0",
        lifespan=_lifespan(state, rows, persistence_check),
        docs_url=None,
        redoc_url=None,
        redirect_slashes=False,
    )
    app.state.turnout = state
    app.state.door = DoorRefusals(state.metrics, PUBLIC_ROUTES, ADMIN_PREFIX, LogSampler(), rows)  # made visible
    errors.install(app)
    app.add_middleware(HeadAsGet)  # the innermost: the middleware around it sees the request's own method
    ops_routes.install(app, state)
    admin.install(app, state)
    observability.install(app, state)
    front_door.install(app, state)  # every surface: chat completions, messages, responses, ...
    messages_routes.install(app, state)  # the rest of the Anthropic surface
    responses_routes.install(app, state)  # stored Responses: GET, DELETE, input_items
    ui.install(app, state)
    _install_models_and_health(app, state)
    _hot_routes_first(app)
    tracer = state.obs.telemetry.tracing  # None: tracing off, no SERVER span
    app.serve_hot(RouteCounts(state.metrics), None if tracer is None else observability.ServerSpans(tracer))
    return app


def _refuse_config(state: IngressState, exc: ConfigError) -> None:
    """Stop the start: the file's `orgs:` cannot be merged into Redis (`exc` names the paths). Logged as
    one error; the ingress answers readiness 503 and exits (the CLI's exit code 2, as a bad file)."""
    log.error(
        "configuration: the orgs of this file cannot be written to Redis: %s. The catalog in force lacks what "
        "they name: admin API edits kept over the file's catalog are named in the warning above; fix the file, "
        "or start one process with TURNOUT_CATALOG_FROM_FILE=1 to replace the catalog with the file's.",
        exc,
    )
    state.config_refused = True
    state.draining = True
    if state.stop_serving is not None:
        state.stop_serving()


def _lifespan(
    state: IngressState,
    rows: RefusalWriter | None,
    persistence_check: Callable[[], Awaitable[object]] | None,
) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """The app's lifespan: starts the queue, the fleet view, the limiter, the runtime (a sealed-keys
    refusal sets `keys_refused` and raises `SealedKeysRefused`), the refusal `rows` writer and the
    later AOF check; on shutdown drains and stops them and closes both Redis clients."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await state.queue.start()
        state.fleet.start()
        state.limiter.start()
        try:
            await state.runtime.start(state.listen_redis, bootstrap=True)
        except SealedKeysRefused:  # logged; the CLI exits with EXIT_SEALED_KEYS
            state.keys_refused = True
            raise
        except ConfigError as exc:  # the file's orgs do not fit the catalog in force: one clear line, no traceback
            if state.stop_serving is None:
                raise
            _refuse_config(state, exc)
        if rows is not None:
            rows.start()
        later = asyncio.create_task(_check_later(state, persistence_check)) if persistence_check else None
        if state.freeze_heap:
            log.info("start-up heap frozen: %d objects", freeze_startup_heap())
        try:
            yield
        finally:
            if later is not None:
                later.cancel()
            state.draining = True
            await state.queue.stop()
            await state.fleet.stop()
            await state.limiter.stop()
            await state.runtime.stop()
            if rows is not None:
                await rows.stop()
            await state.redis.aclose()
            await state.listen_redis.aclose()

    return lifespan


def _install_models_and_health(app: FastAPI, state: IngressState) -> None:
    """The models list and one model (OpenAI's shape, or Anthropic's for an Anthropic SDK), and the
    liveness and readiness probes (503 while draining or with Redis unreachable)."""

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        authenticate(request, state.keyring)
        if "anthropic-version" in request.headers:  # an Anthropic SDK: its shape
            return anthropic_models(state)
        return Response(_json.encode({"object": "list", "data": state.catalog.model_list()}), media_type=errors.JSON)

    @app.get("/v1/models/{model_id:path}")
    async def model(request: Request, model_id: str) -> Response:
        authenticate(request, state.keyring)
        if not model_id:
            raise StarletteHTTPException(404)  # `/v1/models/`: no such route
        return model_object(state, model_id, anthropic="anthropic-version" in request.headers)

    @app.get("/health/liveness")
    async def liveness() -> dict[str, Any]:
        return {"status": "ok"}

    @app.get("/health/readiness")
    async def readiness() -> Response:
        if state.draining:
            return errors.error_response(503, "draining", error_type="service_unavailable", code="draining")
        if not await answers(state.redis, 0.5):
            return errors.error_response(
                503, "Redis is unreachable.", error_type="service_unavailable", code="redis_unavailable"
            )
        return Response(_json.encode({"status": "ready"}), media_type=errors.JSON)


def _hot_routes_first(app: FastAPI) -> None:
    """Move the routes of `HOT_PATHS` to the front of `app`'s routes, keeping every route's
    relative order otherwise (so the same request matches the same route as before: no other
    route's pattern matches these exact paths)."""
    routes = app.router.routes
    hot = [r for r in routes if getattr(r, "path", None) in HOT_PATHS]
    routes[:] = hot + [r for r in routes if getattr(r, "path", None) not in HOT_PATHS]


def app_from_env() -> FastAPI:
    """uvicorn factory: config from `TURNOUT_CONFIG`, Redis from `TURNOUT_REDIS_URL`.

    Raises:
        SettingsError: a malformed environment variable (named).
        turnout.state.persistence.PersistenceRefused: Redis runs without AOF and
            `TURNOUT_ALLOW_NO_AOF` is not set (the start-up check).
    """
    from turnout.config import load_config
    from turnout.runtime import require_persistence

    settings = Settings.from_env(os.environ)
    require_persistence(settings.redis_url, settings, role="ingress")
    config = load_config(settings.config_path, env=settings.env)
    return create_app(config, redis_url=settings.redis_url, settings=settings)
