"""The ingress: FastAPI app factory and the OpenAI-compatible routes.

Owns: the HTTP surface (chat completions, models, health; `HEAD` on every
`GET` route, `turnout_ingress.methods`), the per-process objects (config,
catalog, key ring, Redis client, job queue) built in the factory, and the
hand-off of each non-streaming request to the queue. It makes no upstream
call on the non-streaming path (SPEC §1).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec
from fastapi import FastAPI, Request
from redis.asyncio import Redis
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from turnout.catalog import Catalog
from turnout.catalog.key_check import SealedKeysRefused
from turnout.config import Config
from turnout.core.deadline import Deadline
from turnout.core.plan import NoMatchingOffer, Plan, UnknownModel
from turnout.core.preferences import Preferences
from turnout.core.verdict import client_retry_after_s
from turnout.errors import GatewayUnavailable, RequestRejected
from turnout.health import HealthView
from turnout.observability.tracing import Telemetry
from turnout.runtime import freeze_startup_heap
from turnout.settings import Settings
from turnout.state.persistence import PersistenceRefused
from turnout.state.pool import BufferCheckedPool
from turnout.state.server import answers
from turnout.tenancy.identity import Identity
from turnout.wire import JobPayload
from turnout_ingress import admin, errors, idempotency, observability, ops_routes, ui
from turnout_ingress import messages as anthropic_messages
from turnout_ingress.budgets import budgeted
from turnout_ingress.disconnect import Outlived, unless_client_leaves
from turnout_ingress.hot_path import HOT_PATHS, IngressApp
from turnout_ingress.messages_routes import anthropic_models, model_object
from turnout_ingress.methods import HeadAsGet
from turnout_ingress.ops_routes import RouteCounts
from turnout_ingress.state import IngressState
from turnout_ingress.streaming import serve_stream
from turnout_ingress.validation import authenticate, parse_chat_request, read_body, take_preferences

log = logging.getLogger("turnout.ingress")
_json = msgspec.json.Encoder()


async def _check_plan(
    state: IngressState,
    model: str,
    identity: Identity,
    preferences: Preferences = Preferences(),
    catalog: Catalog | None = None,
) -> tuple[Plan, HealthView]:
    """The request's plan and health view (one Redis round trip), after refusing
    an unknown model (404), preferences that leave no offer (400) or a plan
    whose every target is OPEN (503; its message says when the request's own
    preferences narrowed the plan); `catalog`: the request's snapshot (default: the one in force)."""
    try:
        plan, view = await state.router.plan(
            model, identity.settings, identity.policy, identity.org, preferences, catalog=catalog
        )
    except UnknownModel as exc:
        raise RequestRejected(404, str(exc), code="model_not_found", param="model") from exc
    except NoMatchingOffer as exc:
        raise RequestRejected(400, str(exc), code="no_matching_offer", param="provider") from exc
    wait_s = view.unavailable_for([e.target.key for e in plan.entries])
    if wait_s is not None:
        retry_after = client_retry_after_s(wait_s, state.rng.random())
        left_out = _left_out_by_preferences(state, model, identity, preferences, catalog)
        allowed = " that the request's `provider` preferences allow" if left_out else ""
        raise GatewayUnavailable(
            f"Every provider of `{model}`{allowed} is temporarily out of rotation; retry after {retry_after} s."
            + (f" The preferences left out {_some(left_out)}: without them, those may serve it." if left_out else ""),
            retry_after_s=retry_after,
            code="circuit_open",
        )
    return plan, view


def _left_out_by_preferences(
    state: IngressState, model: str, identity: Identity, preferences: Preferences, catalog: Catalog | None
) -> list[str]:
    """The targets (`provider/model`) a request for `model` could use without its `provider`
    preferences and cannot with them, in plan order; none when the preferences only reorder."""
    if not preferences.narrows:
        return []
    kept = set(state.router.listed_targets(model, identity.settings, identity.policy, preferences, catalog))
    every = state.router.listed_targets(model, identity.settings, identity.policy, catalog=catalog)
    return [t for t in dict.fromkeys(every) if t not in kept]


def _some(targets: list[str], shown: int = 3) -> str:
    """`a/x`, `b/y` and 2 more: the first `shown` targets named, the rest counted."""
    named = ", ".join(f"`{t}`" for t in targets[:shown])
    return named + (f" and {len(targets) - shown} more" if len(targets) > shown else "")


def _budget_exhausted(request_id: str) -> Response:
    return errors.error_response(
        504,
        "The request's time budget ran out before a worker answered.",
        error_type="timeout_error",
        code="budget_exhausted",
        headers={"x-request-id": request_id, "x-should-retry": "false"},
    )


async def _replay(state: IngressState, owner: str, deadline: float, request_id: str) -> Response:
    """Answer a retry carrying a known `Idempotency-Key`: the first request's result
    (joined if still in flight), with no second upstream call."""
    try:
        result = await state.queue.join(owner, deadline)
    except TimeoutError:
        return _budget_exhausted(request_id)
    headers = {**result.headers, "x-turnout-idempotent-replay": "1"}
    return Response(result.body, status_code=result.status_code, headers=headers, media_type=errors.JSON)


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
    redis = Redis.from_pool(
        BufferCheckedPool.from_url(redis_url, socket_connect_timeout=0.5, socket_timeout=0.5, health_check_interval=10)
    )
    listen_redis = Redis.from_pool(
        BufferCheckedPool.from_url(redis_url, socket_connect_timeout=0.5, health_check_interval=10)
    )
    state = IngressState(config, redis, listen_redis, settings, telemetry)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await state.queue.start()
        state.fleet.start()
        state.limiter.start()
        try:
            await state.runtime.start(listen_redis, bootstrap=True)
        except SealedKeysRefused:  # logged; the CLI exits with EXIT_SEALED_KEYS
            state.keys_refused = True
            raise
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
            await redis.aclose()
            await listen_redis.aclose()

    # redirect_slashes off: `/v1/models/` is a JSON 404 naming the route like any other unknown path, not a 307
    app = IngressApp(
        title="Turnout", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None, redirect_slashes=False
    )
    app.state.turnout = state
    errors.install(app)
    app.add_middleware(HeadAsGet)  # the innermost: the middleware around it sees the request's own method
    ops_routes.install(app, state)
    admin.install(app, state)
    observability.install(app, state)
    anthropic_messages.install(app, state, check_plan=_check_plan)
    ui.install(app, state)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        arrived_s = state.clock()
        request_id = uuid.uuid4().hex
        request.state.request_id = request_id
        identity = authenticate(request, state.keyring)
        raw = await read_body(request, state.config.raw.gateway.max_body_bytes)
        body = parse_chat_request(raw)
        preferences = take_preferences(body)
        identity = await budgeted(state, identity)
        deadline = Deadline.of(arrived_s, identity.policy.budget)  # once, from arrival (SPEC §4 budget)
        catalog = state.catalog  # this request's catalog to its end: a swap meanwhile never mixes two
        plan, view = await _check_plan(state, body["model"], identity, preferences, catalog)
        key = idempotency.key_of(request.headers)  # before admission: a refused key costs nothing
        held = await state.limiter.admit(identity, body, len(raw), request_id, stream=bool(body.get("stream")))
        if body.get("stream"):  # a stream is never replayed (turnout_ingress.idempotency)
            return await state.limiter.answer(
                held,
                idempotency.stream_once(
                    state,
                    key,
                    raw,
                    identity,
                    request_id,
                    deadline,
                    lambda: serve_stream(
                        state,
                        request,
                        body,
                        identity,
                        request_id,
                        deadline=deadline,
                        plan=plan,
                        view=view,
                        catalog=catalog,
                    ),
                ),
            )
        return await state.limiter.answer(
            held, _queued(state, request, raw, identity, request_id, preferences, deadline, key, view)
        )

    async def _queued(
        state: IngressState,
        request: Request,
        raw: bytes,
        identity: Identity,
        request_id: str,
        preferences: Preferences,
        deadline: Deadline,
        key: str | None,
        view: HealthView,
    ) -> Response:
        """Non-streaming: the job on the queue (with the health read it was planned with), its
        result as the answer (or a replay)."""
        owner = await idempotency.claim(state, key, raw, identity, request_id, deadline)
        if owner is not None:
            return await _replay(state, owner, deadline.at_s, request_id)
        payload = JobPayload(
            request_id=request_id,
            body=raw,
            org=identity.org,
            squad=identity.squad,
            key=identity.key,
            policy=identity.policy,
            settings=identity.settings,
            preferences=preferences,
            deadline_epoch_s=deadline.at_s,
            reply_to=state.queue.reply_channel,
            health=view.loaded(),
            catalog_version=state.catalogs.version,
        )
        # a keyed job outlives its client: its stored result answers the retry the key announces
        work = asyncio.ensure_future(state.queue.submit(payload))
        submit = await unless_client_leaves(request, work, outlive_client=key is not None)
        if submit is None:
            if key is not None:
                return Outlived(work)  # its concurrency slots stay held until the job ends
            await state.queue.cancel(request_id)
            return Response(status_code=499)
        try:
            result = submit.result()
        except TimeoutError:
            return _budget_exhausted(request_id)
        return Response(result.body, status_code=result.status_code, headers=result.headers, media_type=errors.JSON)

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
        if not await answers(redis, 0.5):
            return errors.error_response(
                503, "Redis is unreachable.", error_type="service_unavailable", code="redis_unavailable"
            )
        return Response(_json.encode({"status": "ready"}), media_type=errors.JSON)

    _hot_routes_first(app)
    if not state.obs.telemetry.exporting:  # with tracing on, the SERVER spans need the whole stack
        app.serve_hot(RouteCounts(state.metrics))
    return app


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
