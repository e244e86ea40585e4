"""The simulator's aiohttp server: routes, shared state, start/run helpers.

Owns: the aiohttp `Application` (the OpenAI routes — chat completions,
legacy text completions, embeddings, responses, models — the same three first ones as Azure
OpenAI serves them under `/openai/deployments/{deployment}/` and its models at `/openai/models`, chat completions and embeddings
under `/keyed/v1/` as a self-hosted endpoint behind its own auth serves them (the key alone in
`api-key`, no scheme; the request's `x-*` headers kept in the log), the Anthropic Messages route of
`anthropic_handler`, Amazon Bedrock's Converse and ConverseStream routes of `bedrock_handler`
(`/model/{modelId}/converse`, `/converse-stream`), `/sim/*` control routes, OpenAI-style 404 for unknown
URLs), the Gemini API's and Vertex AI's routes (`gemini_handler`: `/v1beta/models/{model}:...`,
`/v1/projects/{p}/locations/{l}/publishers/google/models/{model}:...`; Claude on Vertex AI by
`anthropic_handler` at `.../publishers/anthropic/models/{model}:rawPredict`) and their token
endpoint (`google_token`: `POST /token`), the admission every OpenAI route shares (auth, JSON, the route's
fields, scenario selection, attempt logging; `openai_route`) and the ways
to run it (blocking `run`, or `start_in_background` for tests).
Must not import: turnout's gateway packages; the simulator stands alone.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from aiohttp import web

from turnout_sim import (
    anthropic_handler,
    azure_errors,
    bedrock_handler,
    completions_handler,
    completions_wire,
    credentials,
    embeddings_handler,
    embeddings_wire,
    gemini_handler,
    google_token,
    openai_handler,
    openai_steps,
    responses_handler,
    responses_wire,
)
from turnout_sim import openai_errors as errors
from turnout_sim import openai_wire as wire
from turnout_sim.attempt_log import Attempt, AttemptLog, End, ScenarioCursors
from turnout_sim.clock import Clock
from turnout_sim.scenarios import Step, scenario_for

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9100
SHUTDOWN_TIMEOUT_S = 2.0
"""Seconds shutdown waits for in-flight handlers before cancelling them."""
SCENARIO_HEADER = "x-sim-scenario"
MAX_BODY_BYTES = 64 * 1024 * 1024
"""Largest request body accepted, in bytes."""
SEED_ENV = "TURNOUT_SIM_SEED"
"""Environment variable `run` reads the `fail<P>` seed from (integer, default 0)."""


@dataclass(slots=True)
class SimState:
    """Everything one simulator instance remembers.

    Attributes:
        clock: wall clock, epoch seconds (log times, `created`, `down<N>s`,
            `cap<N>` windows).
        seed: seed of the `fail<P>` rolls (see `faults.fail_roll`).
        log: every attempt received.
        cursors: the next step of each scenario.
        stopping: set on shutdown so held connections (hang, stall) end.
    """

    clock: Clock
    seed: int = 0
    log: AttemptLog = field(default_factory=AttemptLog)
    cursors: ScenarioCursors = field(default_factory=ScenarioCursors)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)


STATE = web.AppKey("turnout_sim_state", SimState)


def _authorized(header: str | None) -> bool:
    if header is None:
        return False
    scheme, _, credential = header.partition(" ")
    return scheme.lower() == "bearer" and bool(credential.strip())


def _revoked(header: str | None) -> bool:
    return credentials.revoked((header or "").partition(" ")[2])


def _env(state: SimState, azure: azure_errors.AzureCall | None = None) -> openai_steps.Env:
    return openai_steps.Env(clock=state.clock, stopping=state.stopping, received_mono_s=time.monotonic(), azure=azure)


def _azure_call(request: web.Request, operation: str | None) -> azure_errors.AzureCall | None:
    """What an Azure route was asked (None on the OpenAI routes)."""
    if operation is None:
        return None
    return azure_errors.AzureCall(operation=operation, api_version=request.query.get("api-version", ""))


class _Asked(Protocol):
    @property
    def model(self) -> str: ...


Parsed = TypeVar("Parsed", bound=_Asked)
Parse = Callable[[object], Parsed]
"""Reads a decoded body into a route's request; raises `wire.RequestError`."""
Answer = Callable[..., Awaitable[web.StreamResponse]]
"""`answer(request, parsed, step, *, verdict, attempt, env)`: the route's answer to one step."""


KEYED_HEADER = "api-key"
"""The header a `/keyed/v1/` route takes its key in, alone (no `Bearer`)."""


def openai_route(
    parse: Parse[Parsed], answer: Answer, *, azure: str | None = None, keyed: bool = False
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """A `POST` handler of an OpenAI route: admit, log, consume a step, answer.

    With `azure` (Azure's operation name, `azure_errors.OPERATIONS`) it is Azure OpenAI's
    route of a deployment (`/openai/deployments/{deployment}/...`): the key comes in
    `api-key` (401 `Access denied ...` without a usable one), `?api-version=` is required
    (400 without it), the deployment name is the model (the body's `model` is replaced by
    it, so `dep~429ra2,200` is a scenario), and a `429*` step is worded as Azure's.

    Admission is the same for every OpenAI route: a Bearer key (401 without
    one; a revoked key, see `credentials`, gets 401 too), a JSON body (400),
    the route's own fields (`parse`; 400 with its body) and a valid scenario
    (400). The request is logged in `/sim/log` at arrival, its scenario key
    (model name, `x-sim-scenario`) consumes a step, and `answer` applies it.
    The response is completed here (`openai_steps.deliver`) so the log
    records when and how the request ended (`ended_s`, `end`).

    With `keyed`, it is an OpenAI-compatible endpoint behind its own auth (`/keyed/v1/...`):
    the key comes alone in `api-key` (OpenAI's 401 without a usable one, a Bearer token
    included), and the request's `x-*` headers but the request id and the scenario are kept
    as `received.headers` in `/sim/log`.

    Args:
        parse: the route's request reader.
        answer: the route's answer to a step.
    """

    async def handler(request: web.Request) -> web.StreamResponse:
        state = request.app[STATE]
        env = _env(state, _azure_call(request, azure))
        raw = await request.read()
        try:
            body: object = json.loads(raw)
            parsed = True
        except ValueError:  # includes UnicodeDecodeError
            body, parsed = None, False
        if azure is not None and isinstance(body, dict):
            body = {**body, "model": request.match_info["deployment"]}  # the deployment is the model
        fields = body if isinstance(body, dict) else {}
        model = fields.get("model")
        authorization = request.headers.get(KEYED_HEADER if azure is not None or keyed else "Authorization")
        attempt = state.log.record(
            t_s=state.clock(),
            model=model if isinstance(model, str) else None,
            stream=fields.get("stream") is True,
            authorization=authorization,
            request_id=request.headers.get("x-request-id"),
        )
        if keyed:
            skip = {"x-request-id", SCENARIO_HEADER.lower()}
            extra = {k.lower(): v for k, v in request.headers.items() if k.lower().startswith("x-")}
            attempt.received = {"headers": {k: v for k, v in sorted(extra.items()) if k not in skip}}
        try:
            resp = await _admit(request, state, env, attempt, body if parsed else _UNPARSED, parse, answer, keyed)
            return await openai_steps.deliver(request, resp, attempt, env)
        except asyncio.CancelledError:  # shutdown cancelled the handler
            attempt.finish(End.FAULT, state.clock())
            raise

    return handler


_UNPARSED = object()
"""Stands for a body that is not JSON."""


async def _admit(
    request: web.Request,
    state: SimState,
    env: openai_steps.Env,
    attempt: Attempt,
    body: object,
    parse: Parse[Parsed],
    answer: Answer,
    keyed: bool = False,
) -> web.StreamResponse:
    """Reject the request or apply its scenario step (not yet completed); `keyed`: the key is
    read alone from `KEYED_HEADER` (`openai_route`)."""
    authorization = request.headers.get("Authorization")

    def reject(status: int, error: errors.ErrorBody) -> web.Response:
        attempt.status = status
        return openai_steps.json_response(env, status, error)

    if env.azure is not None:
        key = request.headers.get("api-key", "")
        if not key.strip() or credentials.revoked(key):
            return reject(401, azure_errors.access_denied_error())
        if not env.azure.api_version:
            return reject(400, azure_errors.missing_api_version_error())
    elif keyed:
        key = request.headers.get(KEYED_HEADER, "")
        if not key.strip() or key.lower().startswith("bearer "):
            return reject(401, errors.missing_key_error())
        if credentials.revoked(key):
            return reject(401, errors.status_error(401, ""))
    elif not _authorized(authorization):
        return reject(401, errors.missing_key_error())
    elif _revoked(authorization):
        return reject(401, errors.status_error(401, ""))
    if body is _UNPARSED:
        return reject(400, errors.invalid_json_error())
    try:
        req = parse(body)
    except wire.RequestError as exc:
        return reject(400, exc.body)
    header = request.headers.get(SCENARIO_HEADER)
    try:
        steps = scenario_for(req.model, header)
    except ValueError as exc:
        return reject(400, errors.invalid_scenario_error(str(exc)))
    turn = state.cursors.turn((req.model, header), steps, attempt.t_s, seed=state.seed)
    attempt.step = turn.step.token
    return await answer(request, req, turn.step, verdict=turn.verdict, attempt=attempt, env=env)


async def _chat_answer(request: web.Request, req: wire.ChatRequest, step: Step, **kwargs: Any) -> web.StreamResponse:
    # looked up at call time, so a test may wrap `openai_handler.answer`
    return await openai_handler.answer(request, req, step, **kwargs)


async def list_models(request: web.Request) -> web.Response:
    """`GET /v1/models`: a few model ids (auth required, like OpenAI)."""
    state = request.app[STATE]
    env = _env(state)
    if not _authorized(request.headers.get("Authorization")):
        return openai_steps.json_response(env, 401, errors.missing_key_error())
    return openai_steps.json_response(env, 200, wire.models_list(1_700_000_000))


async def list_azure_models(request: web.Request) -> web.Response:
    """`GET /openai/models?api-version=...`: Azure OpenAI's list of models (`api-key` required,
    401 without it; 400 without `api-version`, as Azure answers)."""
    env = _env(request.app[STATE])
    if not request.headers.get(KEYED_HEADER, "").strip():
        return openai_steps.json_response(env, 401, azure_errors.access_denied_error())
    if not request.query.get("api-version"):
        return openai_steps.json_response(env, 400, azure_errors.missing_api_version_error())
    return openai_steps.json_response(env, 200, wire.azure_models_list(1_700_000_000))


async def get_log(request: web.Request) -> web.Response:
    """`GET /sim/log[?model=...]`: every attempt, in arrival order.

    Each entry: `seq`, `t_s`, `model`, `step`, `status`, `stream`,
    `auth_fingerprint`, `request_id`, `ended_s` (epoch seconds when the
    simulator finished with the request, or null while open) and `end`
    (`"complete"`, `"client_gone"`, `"fault"` or null); see `Attempt`.
    """
    entries = request.app[STATE].log.entries(request.query.get("model"))
    return web.json_response([entry.to_json() for entry in entries])


async def delete_log(request: web.Request) -> web.Response:
    """`DELETE /sim/log`: forget all attempts and restart every scenario."""
    state = request.app[STATE]
    cleared = len(state.log.entries())
    state.log.clear()
    state.cursors.clear()
    return web.json_response({"cleared": cleared})


async def health(request: web.Request) -> web.Response:
    """`GET /sim/health`: always 200."""
    return web.json_response({"status": "ok"})


async def not_found(request: web.Request) -> web.Response:
    """Any other URL: OpenAI's 404 `Invalid URL (METHOD /path)`."""
    env = _env(request.app[STATE])
    return openai_steps.json_response(env, 404, errors.invalid_url_error(request.method, request.path))


async def _on_shutdown(app: web.Application) -> None:
    app[STATE].stopping.set()


def create_app(*, clock: Clock = time.time, seed: int = 0) -> web.Application:
    """Build the simulator application.

    Args:
        clock: wall clock returning epoch seconds (float); injected by tests.
        seed: seed of the `fail<P>` rolls; the same seed and the same request
            order per scenario key give the same answers.

    Returns:
        A fresh application with its own log and scenario cursors.
    """
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app[STATE] = SimState(clock=clock, seed=seed)
    app.router.add_post("/v1/chat/completions", openai_route(wire.parse_request, _chat_answer))
    app.router.add_post("/v1/completions", openai_route(completions_wire.parse_request, completions_handler.answer))
    app.router.add_post("/v1/embeddings", openai_route(embeddings_wire.parse_request, embeddings_handler.answer))
    responses = responses_handler.ResponseStore()
    app.router.add_post(
        "/v1/responses",
        openai_route(
            functools.partial(responses_wire.parse_request, known=responses.__contains__),
            functools.partial(responses_handler.answer, store=responses),
        ),
    )
    deployment = "/openai/deployments/{deployment}/"
    chat_ops, cmpl_ops, embed_ops = (
        azure_errors.OPERATIONS[t] for t in ("chat/completions", "completions", "embeddings")
    )
    app.router.add_post(deployment + "chat/completions", openai_route(wire.parse_request, _chat_answer, azure=chat_ops))
    app.router.add_post(
        deployment + "completions",
        openai_route(completions_wire.parse_request, completions_handler.answer, azure=cmpl_ops),
    )
    app.router.add_post(
        deployment + "embeddings",
        openai_route(embeddings_wire.parse_request, embeddings_handler.answer, azure=embed_ops),
    )
    app.router.add_post("/keyed/v1/chat/completions", openai_route(wire.parse_request, _chat_answer, keyed=True))
    app.router.add_post(
        "/keyed/v1/embeddings", openai_route(embeddings_wire.parse_request, embeddings_handler.answer, keyed=True)
    )
    app.router.add_post("/v1/messages", anthropic_handler.route(STATE))
    app[google_token.ISSUED] = set()
    app.router.add_post("/token", google_token.token)
    for version in ("v1beta", "v1"):  # the Gemini API serves both
        app.router.add_post(f"/{version}/models/{{call}}", gemini_handler.route(STATE, vertex=False))
    publishers = "/v1/projects/{project}/locations/{location}/publishers/"
    app.router.add_post(publishers + "google/models/{call}", gemini_handler.route(STATE, vertex=True))
    app.router.add_post(publishers + "anthropic/models/{call}", anthropic_handler.route(STATE, vertex=True))
    app.router.add_post("/v1/messages/count_tokens", anthropic_handler.count_tokens)
    app.router.add_post("/model/{model:.+}/converse", bedrock_handler.route(STATE, stream=False))
    app.router.add_post("/model/{model:.+}/converse-stream", bedrock_handler.route(STATE, stream=True))
    app.router.add_post("/model/{model:.+}/count-tokens", bedrock_handler.count_route(STATE))
    app.router.add_get("/v1/models", list_models)
    app.router.add_get("/openai/models", list_azure_models)
    app.router.add_get("/sim/log", get_log)
    app.router.add_delete("/sim/log", delete_log)
    app.router.add_get("/sim/health", health)
    app.router.add_route("*", "/{tail:.*}", not_found)
    app.on_shutdown.append(_on_shutdown)
    return app


async def start_in_background(
    host: str = DEFAULT_HOST, port: int = 0, *, clock: Clock = time.time, seed: int = 0
) -> tuple[web.AppRunner, str]:
    """Start the simulator on the running event loop and return at once.

    Args:
        host: address to bind.
        port: TCP port; 0 picks a free one.
        clock: wall clock returning epoch seconds.
        seed: seed of the `fail<P>` rolls.

    Returns:
        The runner (call `await runner.cleanup()` to stop) and the base URL
        (`http://127.0.0.1:54321`, no trailing slash, without `/v1`).
    """
    runner = web.AppRunner(create_app(clock=clock, seed=seed), shutdown_timeout=SHUTDOWN_TIMEOUT_S)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound_port = runner.addresses[0][1]
    shown_host = f"[{host}]" if ":" in host else host
    return runner, f"http://{shown_host}:{bound_port}"


def seed_from_env(environ: dict[str, str] | None = None) -> int:
    """The `fail<P>` seed named by `TURNOUT_SIM_SEED`, or 0 when unset/empty.

    Args:
        environ: the environment to read; `os.environ` when None.

    Raises:
        ValueError: the variable is set but not an integer.
    """
    raw = (os.environ if environ is None else environ).get(SEED_ENV, "").strip()
    if not raw:
        return 0
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{SEED_ENV} must be an integer, got {raw!r}") from None


def run(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *, seed: int | None = None) -> None:
    """Serve the simulator until interrupted (blocking; `turnout sim`).

    Args:
        host: address to bind.
        port: TCP port.
        seed: seed of the `fail<P>` rolls; None reads `TURNOUT_SIM_SEED`
            (default 0).

    Raises:
        ValueError: `seed` is None and `TURNOUT_SIM_SEED` is not an integer.
    """
    chosen = seed_from_env() if seed is None else seed
    web.run_app(create_app(seed=chosen), host=host, port=port, shutdown_timeout=SHUTDOWN_TIMEOUT_S)
