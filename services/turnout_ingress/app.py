"""The ingress: FastAPI app factory and the OpenAI-compatible routes.

Owns: the HTTP surface (chat completions, models, health), the per-process
objects (config, catalog, key ring, Redis client, job queue) built in the
factory, and the hand-off of each non-streaming request to the queue. It
makes no upstream call on the non-streaming path (SPEC §1).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import os
import random
import socket
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import msgspec
from fastapi import FastAPI, Request
from redis.asyncio import Redis
from redis.exceptions import RedisError
from starlette.responses import Response

from turnout.adapters.transport import make_http_client
from turnout.catalog import Catalog
from turnout.catalog.live import LiveCatalog
from turnout.catalog.watch import attach as attach_catalog
from turnout.config import Config
from turnout.core.plan import NoMatchingOffer, Plan, UnknownModel
from turnout.core.preferences import Preferences
from turnout.core.verdict import client_retry_after_s
from turnout.errors import GatewayUnavailable, RequestRejected
from turnout.health import HealthView, redis_breakers
from turnout.observability.jsonlog import scrub_logs
from turnout.observability.metrics import Metrics
from turnout.state.clock_check import ClockSkewCheck
from turnout.state.fleet import FleetWatch
from turnout.state.queue import IdempotencyConflict, JobQueue
from turnout.router import Router
from turnout.adapters.guarded import make_guarded_client
from turnout.tenancy.directory import directory_from_env
from turnout.tenancy.identity import Identity
from turnout.observability.tracing import Telemetry
from turnout.wire import JobPayload
from turnout_ingress import admin, errors, observability, ops_routes, ui
from turnout_ingress import messages as anthropic_messages
from turnout_ingress.budgets import budgeted
from turnout_ingress.disconnect import unless_client_leaves
from turnout_ingress.idempotency import stream_once
from turnout_ingress.limits import Limiter
from turnout_ingress.messages_routes import anthropic_models
from turnout_ingress.streaming import serve_stream
from turnout_ingress.validation import authenticate, parse_chat_request, read_body, take_preferences

log = logging.getLogger("turnout.ingress")
_json = msgspec.json.Encoder()


class IngressState:
    """Objects built once per ingress process."""

    def __init__(self, config: Config, redis: Redis, listen_redis: Redis, telemetry: Telemetry | None = None) -> None:
        self.config = config
        self.catalogs = LiveCatalog(config)  # models and providers: Redis, swapped whole on change
        self.keyring = directory_from_env(config, redis)  # gateway keys, BYOK, endpoints: Redis (SPEC §6)
        self.redis = redis
        self.ingress_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.listen_redis = listen_redis
        self.metrics = Metrics()
        self.obs = observability.IngressObservability(
            config, redis, self.catalogs, self.metrics, telemetry, scrub=self.keyring.scrubber.credentials
        )
        self.fleet = FleetWatch(redis)  # the workers' slots and service time: the door's wait estimate
        self.queue = JobQueue(
            redis, listen_redis=listen_redis, ingress_id=self.ingress_id, max_depth=config.raw.gateway.max_queue_depth,
            tracer=self.obs.telemetry.tracer, fleet=self.fleet,
        )
        self.draining = False
        self.clock_check = ClockSkewCheck(redis, self.metrics.clock_skew, service=observability.SERVICE_NAME)
        self.limiter = Limiter(redis)
        self.rng = random.Random()
        self.breakers = redis_breakers(config, redis, self.catalogs, metrics=self.metrics, rng=self.rng)
        self.catalog_watch = attach_catalog(self.catalogs, redis, config, directory=self.keyring, breakers=self.breakers)
        self.http = make_http_client(max_connections=config.raw.gateway.ingress_max_streams + 100)
        self.obs.instrument(self.http)
        self.custom_http = make_guarded_client(max_connections=200, allow=self.keyring.allow)
        self.router = Router(
            catalog=self.catalogs, http=self.http, breakers=self.breakers, observer=self.obs.observer, rng=self.rng,
            credentials=self.keyring, custom_http=self.custom_http, scrubber=self.keyring.scrubber,
        )

    @property
    def catalog(self) -> Catalog:
        """The catalog in force now (`turnout.catalog.live`)."""
        return self.catalogs.current


async def _check_plan(
    state: IngressState, model: str, identity: Identity, preferences: Preferences = Preferences(),
    catalog: Catalog | None = None,
) -> tuple[Plan, HealthView]:
    """The request's plan and health view (one Redis round trip), after refusing
    an unknown model (404), preferences that leave no offer (400) or a plan
    whose every target is OPEN (503); `catalog`: the request's snapshot (default: the one in force)."""
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
        raise GatewayUnavailable(
            f"Every provider of `{model}` is temporarily out of rotation; retry after {retry_after} s.",
            retry_after_s=retry_after, code="circuit_open",
        )
    return plan, view


def _budget_exhausted(request_id: str) -> Response:
    return errors.error_response(
        504, "The request's time budget ran out before a worker answered.",
        error_type="timeout_error", code="budget_exhausted",
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


def create_app(config: Config, *, redis_url: str, telemetry: Telemetry | None = None) -> FastAPI:
    """Build the ingress app for `config`, talking to Redis at `redis_url` (telemetry: from `OTEL_*` by default)."""
    redis = Redis.from_url(redis_url, socket_connect_timeout=0.5, socket_timeout=0.5, health_check_interval=10)
    listen_redis = Redis.from_url(redis_url, socket_connect_timeout=0.5, health_check_interval=10)
    state = IngressState(config, redis, listen_redis, telemetry)
    scrub_logs(state.keyring.scrubber.credentials)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await state.queue.start()
        state.clock_check.start()
        state.fleet.start()
        state.limiter.start()
        state.obs.start()
        await state.catalog_watch.start(listen_redis)
        await state.keyring.start(listen_redis, bootstrap=True)
        try:
            yield
        finally:
            state.draining = True
            await state.queue.stop()
            await state.clock_check.stop()
            await state.fleet.stop()
            await state.limiter.stop()
            await state.obs.stop()
            await state.http.aclose()
            await state.keyring.stop()
            await state.catalog_watch.stop()
            await state.custom_http.aclose()
            await redis.aclose()
            await listen_redis.aclose()

    # redirect_slashes off: `/v1/models/` is a JSON 404 naming the route like any other unknown path, not a 307
    app = FastAPI(title="Turnout", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None,
                  redirect_slashes=False)
    app.state.turnout = state
    errors.install(app)
    ops_routes.install(app, state)
    admin.install(app, state)
    observability.install(app, state)
    anthropic_messages.install(app, state, check_plan=_check_plan)
    ui.install(app, state)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        request_id = uuid.uuid4().hex
        request.state.request_id = request_id
        identity = authenticate(request, state.keyring)
        raw = await read_body(request, state.config.raw.gateway.max_body_bytes)
        body = parse_chat_request(raw)
        preferences = take_preferences(body)
        identity = await budgeted(state, identity)
        catalog = state.catalog  # this request's catalog to its end: a swap meanwhile never mixes two
        plan, view = await _check_plan(state, body["model"], identity, preferences, catalog)
        held = await state.limiter.admit(identity, body, len(raw), request_id, stream=bool(body.get("stream")))
        if body.get("stream"):  # a stream is never replayed (turnout_ingress.idempotency)
            return await state.limiter.answer(held, stream_once(
                state, request.headers.get("idempotency-key"), raw, identity, request_id,
                lambda: serve_stream(state, request, body, identity, request_id, plan=plan, view=view,
                                     catalog=catalog)))
        return await state.limiter.answer(
            held, _queued(state, request, raw, identity, request_id, preferences, view))

    async def _queued(
        state: IngressState, request: Request, raw: bytes, identity: Identity, request_id: str,
        preferences: Preferences, view: HealthView,
    ) -> Response:
        """Non-streaming: the job on the queue (with the health read it was planned with), its
        result as the answer (or a replay)."""
        deadline = time.time() + identity.policy.budget.max_total_latency_ms / 1000
        idempotency = request.headers.get("idempotency-key")
        if idempotency is not None:
            if not 0 < len(idempotency) <= 255:
                raise RequestRejected(
                    400, "`Idempotency-Key` must be 1 to 255 characters.", param="Idempotency-Key",
                    code="invalid_request",
                )
            digest = hashlib.sha256(raw).hexdigest()
            ttl_s = int(identity.policy.budget.max_total_latency_ms / 1000) + state.config.raw.gateway.result_ttl_s
            try:
                owner = await state.queue.claim_idempotency(
                    identity.org, identity.key, idempotency, digest, request_id, ttl_s
                )
            except IdempotencyConflict as exc:
                raise RequestRejected(
                    409, "This Idempotency-Key was already used with a different request body.",
                    error_type="invalid_request_error", code="idempotency_key_reused", param="Idempotency-Key",
                ) from exc
            if owner is not None:
                return await _replay(state, owner, deadline, request_id)
        payload = JobPayload(
            request_id=request_id,
            body=raw,
            org=identity.org,
            squad=identity.squad,
            key=identity.key,
            policy=identity.policy,
            settings=identity.settings,
            preferences=preferences,
            deadline_epoch_s=deadline,
            reply_to=state.queue.reply_channel,
            health=view.loaded(),
            catalog_version=state.catalogs.version,
        )
        submit = await unless_client_leaves(request, state.queue.submit(payload))
        if submit is None:
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

    @app.get("/health/liveness")
    async def liveness() -> dict[str, Any]:
        return {"status": "ok"}

    @app.get("/health/readiness")
    async def readiness() -> Response:
        if state.draining:
            return errors.error_response(503, "draining", error_type="service_unavailable", code="draining")
        try:
            await asyncio.wait_for(redis.ping(), 0.5)
        except (RedisError, OSError, TimeoutError):
            return errors.error_response(
                503, "Redis is unreachable.", error_type="service_unavailable", code="redis_unavailable"
            )
        return Response(_json.encode({"status": "ready"}), media_type=errors.JSON)

    _hot_routes_first(app)
    return app


HOT_PATHS = frozenset({"/v1/chat/completions", "/v1/messages"})
"""The paths nearly every request takes: matched first (Starlette tries routes in order)."""


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
        turnout.state.persistence.PersistenceOff: Redis runs without AOF and
            `TURNOUT_ALLOW_NO_AOF` is not set (the start-up check).
    """
    from turnout.config import load_config
    from turnout.state.persistence import require_persistence

    redis_url = os.environ.get("TURNOUT_REDIS_URL", "redis://127.0.0.1:6379/0")
    require_persistence(redis_url, service="turnout ingress")
    config = load_config(os.environ.get("TURNOUT_CONFIG", "turnout.yaml"))
    return create_app(config, redis_url=redis_url)
