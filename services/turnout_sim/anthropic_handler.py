"""`POST /v1/messages`: the simulator's Anthropic Messages API.

Owns: admitting a Messages request (a key — `x-api-key`, or
`Authorization: Bearer`, which the official `anthropic` SDK 2.x sends; a
revoked key, see `credentials`, gets 401 `authentication_error` — and
`anthropic-version` required, JSON, fields, scenario), logging it in the
shared attempt log (`/sim/log`, the key's header value fingerprinted; the
body as received and the `anthropic-*` headers kept as `received`, so a
test reads what an upstream was sent), and
applying its scenario step in Anthropic's wire format. The
fault DSL is the OpenAI side's (`scenarios`); the Anthropic specifics:

- bare statuses answer Anthropic's bodies (`529` → `overloaded_error`,
  `429` → `rate_limit_error`, `500` → `api_error`, ...);
- `429ra<N>` sends `retry-after: N` and `anthropic-ratelimit-requests-reset`
  (RFC 3339, now + N s) with `...-requests-remaining: 0`; `429rr<duration>`
  sends only the reset header; `429rad` / `429ram` as on the OpenAI side;
- `quota`, `ctx`, `policy`, `noprefill` answer 400 `invalid_request_error`
  with Anthropic's wording;
- `bodyerr` / `bodyerr429`: a stream's first event is an `error` event
  (`overloaded_error` / `rate_limit_error`); otherwise a 200 error body;
- `nodone`: the stream ends after `message_delta`, without `message_stop`;
- `reset`, `close`, `hang`, `slow`, `cut`, `stall`, `badchunk`, `down`,
  `fail<P>`, `i<N>` and `+<N>ms` behave as on the OpenAI side (counts over
  the `content_block_delta` events; a failed `fail` roll answers 503
  `api_error`);
- `cap<N>` over capacity answers 529 `overloaded_error`, as the bare `529`;
- `len<N>` with `max_tokens` < N: the first `max_tokens` tokens, with
  `stop_reason: max_tokens`.
Must not import: turnout's gateway packages.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import json
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from turnout_sim import anthropic_wire as wire
from turnout_sim import credentials, step_faults
from turnout_sim.attempt_log import Attempt, End
from turnout_sim.faults import Verdict
from turnout_sim.google_token import ISSUED
from turnout_sim.openai_steps import Env, deliver
from turnout_sim.scenarios import Step, StepKind, scenario_for

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
SCENARIO_HEADER = "x-sim-scenario"


def _rfc3339(epoch_s: float) -> str:
    return datetime.datetime.fromtimestamp(epoch_s, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _reset_headers(env: Env, seconds: float) -> dict[str, str]:
    return {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": _rfc3339(env.clock() + seconds),
    }


def _json(env: Env, status: int, body: object, headers: dict[str, str] | None = None) -> web.Response:
    processing_ms = int((time.monotonic() - env.received_mono_s) * 1000)
    base = {"request-id": f"req_{uuid.uuid4().hex}", "x-sim-processing-ms": str(processing_ms)}
    return web.Response(
        status=status, body=json.dumps(body).encode(), content_type="application/json", headers=base | (headers or {})
    )


def _error_for(
    step: Step, req: wire.MessagesRequest, verdict: Verdict, env: Env
) -> tuple[int, wire.ErrorBody, dict[str, str]] | None:
    """The (status, body, headers) of an error step, or None for a success."""
    kind, limited = step.kind, wire.status_error(429, req.model)
    if verdict is Verdict.UNAVAILABLE:  # down window, fail roll
        return 503, wire.status_error(503, req.model), {}
    if verdict is Verdict.OVERLOADED:  # over cap<N>
        return 529, wire.status_error(529, req.model), {}
    if kind is StepKind.ERROR:
        assert step.status is not None
        return step.status, wire.status_error(step.status, req.model), {}
    if kind is StepKind.RETRY_AFTER:
        seconds = step.seconds or 0
        return 429, limited, {"retry-after": str(seconds), **_reset_headers(env, seconds)}
    if kind is StepKind.RETRY_AFTER_DATE:
        return 429, limited, {"retry-after": email.utils.formatdate(env.clock() + (step.seconds or 0), usegmt=True)}
    if kind is StepKind.RETRY_AFTER_MS:
        return 429, limited, {"retry-after-ms": str(step.delay_ms)}
    if kind is StepKind.RESET_REQUESTS:
        reset_s = sum((float(n) * _UNIT_S[u] for n, u in _DURATION_PART.findall(step.duration or "")), 0.0)
        return 429, limited, _reset_headers(env, reset_s)
    if kind is StepKind.USAGE_CAP:
        reset_s = sum((float(n) * _UNIT_S[u] for n, u in _DURATION_PART.findall(step.duration or "")), 0.0)
        return 429, wire.error("rate_limit_error", "Usage limit reached for your plan."), _reset_headers(env, reset_s)
    if kind is StepKind.RATE_LIMIT_403:
        return 403, wire.error("rate_limit_error", "Rate limit reached: too many requests."), {}
    if kind is StepKind.QUOTA:
        return 400, wire.quota_error(), {}
    if kind is StepKind.CONTEXT:
        return 400, wire.context_error(req.chat.prompt_tokens), {}
    if kind in (StepKind.POLICY, StepKind.PROMPT_FILTER):  # `cf400`: this wire's own policy refusal
        return 400, wire.error("invalid_request_error", "Output blocked by content filtering policy"), {}
    if kind is StepKind.NO_PREFILL and req.chat.prefill is not None:
        return (
            400,
            wire.error(
                "invalid_request_error",
                "This model does not support assistant message prefill. The conversation must end with a user message.",
            ),
            {},
        )
    return None


def _body_error(step: Step) -> wire.ErrorBody:
    if step.kind is StepKind.BODY_ERROR_429:
        return wire.error("rate_limit_error", "Number of requests has exceeded your rate limit.")
    return wire.error("overloaded_error", "Overloaded")


async def _answer_json(
    request: web.Request, req: wire.MessagesRequest, step: Step, attempt: Attempt, env: Env, message_id: str
) -> web.StreamResponse:
    if step.kind in (StepKind.BODY_ERROR, StepKind.BODY_ERROR_429):
        return _json(env, 200, _body_error(step))
    body = json.dumps(wire.message(req, message_id=message_id, seq=attempt.seq)).encode()
    if step.kind is StepKind.BAD_CHUNK:
        body = body[: len(body) // 2]
    if step.kind not in step_faults.HELD_BODIES:
        return web.Response(status=200, body=body, content_type="application/json")
    return await step_faults.held_body(request, body, step, attempt, env)


async def _answer_stream(
    request: web.Request, req: wire.MessagesRequest, step: Step, attempt: Attempt, env: Env, message_id: str
) -> web.StreamResponse:
    kind = step.kind
    resp = web.StreamResponse(status=200, headers={"cache-control": "no-cache", "request-id": message_id})
    resp.content_type = "text/event-stream"
    resp.charset = "utf-8"
    resp.enable_chunked_encoding()
    if kind is StepKind.NO_DONE:
        resp.force_close()
    await resp.prepare(request)
    if kind in (StepKind.BODY_ERROR, StepKind.BODY_ERROR_429):
        await resp.write(wire.error_event(_body_error(step)))
        await resp.write_eof()
        return resp
    for opening in wire.opening_events(req, message_id=message_id, seq=attempt.seq):
        await resp.write(opening)
    if kind is StepKind.SLOW and not await step_faults.pause(request, attempt, env, (step.delay_ms or 0) / 1000):
        return resp
    pieces = wire.pieces(req)
    stop_after = min(step.count or 0, len(pieces)) if kind in (StepKind.CUT, StepKind.STALL) else len(pieces)
    for index, piece in enumerate(pieces[:stop_after]):
        if index and step.interval_ms and not await step_faults.pause(request, attempt, env, step.interval_ms / 1000):
            return resp
        await resp.write(
            wire.MALFORMED_EVENT
            if kind is StepKind.BAD_CHUNK and index + 1 == step.count
            else wire.delta_event(req, piece)
        )
    if await step_faults.cut_or_stall(request, kind, attempt, env):
        return resp
    for closing in wire.closing_events(req, with_stop=kind is not StepKind.NO_DONE):
        await resp.write(closing)
    await resp.write_eof()
    return resp


async def answer(
    request: web.Request, req: wire.MessagesRequest, step: Step, *, verdict: Verdict, attempt: Attempt, env: Env
) -> web.StreamResponse:
    """Answer a Messages request according to `step` (see the module doc).

    Records the attempt's end for faults and departed clients; otherwise
    the caller completes the response with `deliver`.
    """
    if step.latency_ms and not await step_faults.pause(request, attempt, env, step.latency_ms / 1000):
        return web.Response()
    if step.kind in step_faults.SOCKET_FAULTS:
        return await step_faults.socket_fault(request, step.kind, attempt, env)
    error = _error_for(step, req, verdict, env)
    if error is not None:
        attempt.status = error[0]
        return _json(env, *error)
    attempt.status = 200
    if step.answer_tokens is not None:  # len<N>: the model's answer has a length of its own
        req = wire.with_answer_length(req, step.answer_tokens)
    message_id = f"msg_sim{attempt.seq:012d}"
    try:
        if req.stream:
            return await _answer_stream(request, req, step, attempt, env, message_id)
        return await _answer_json(request, req, step, attempt, env, message_id)
    except ConnectionError:
        attempt.finish(End.CLIENT_GONE, env.clock())
        return web.Response()


VERTEX_VERSION = "vertex-2023-10-16"
"""The `anthropic_version` a Claude request on Vertex AI carries in its body."""
VERTEX_METHODS = ("rawPredict", "streamRawPredict")


VERTEX_COUNT = "count-tokens"
"""Vertex AI's `.../publishers/anthropic/models/count-tokens:rawPredict`: Anthropic's count_tokens."""


def _vertex_count(request: web.Request, body: object, method: str) -> web.Response:
    """`count-tokens:rawPredict`: `{"input_tokens": N}` as `count_tokens` counts, for a body naming
    its `model` and `anthropic_version: "vertex-2023-10-16"` with a token the token endpoint issued;
    not logged (no attempt)."""
    token = credentials.bearer(request.headers.get("authorization"))
    if token is None or token not in request.app[ISSUED]:
        return web.json_response(wire.error("authentication_error", "invalid authentication credentials"), status=401)
    fields = body if isinstance(body, dict) else {}
    if method != "rawPredict" or fields.get("anthropic_version") != VERTEX_VERSION:
        return web.json_response(wire.error("invalid_request_error", "anthropic_version: is required"), status=400)
    try:
        req = wire.parse_request({**fields, "anthropic_version": None, "max_tokens": 1})
    except wire.RequestError as exc:
        return web.json_response(exc.body, status=400)
    return web.json_response({"input_tokens": req.chat.prompt_tokens})


def route(
    state_key: web.AppKey[Any], *, vertex: bool = False
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """The `POST /v1/messages` handler over the app's `SimState` (at `state_key`); with `vertex`,
    Vertex AI's `.../publishers/anthropic/models/{model}:rawPredict` (`:streamRawPredict`;
    `count-tokens:rawPredict` is the count, `_vertex_count`): the model named by the URL (the body has none), `anthropic_version: "vertex-2023-10-16"` in the
    body instead of the header (400 without it), a Bearer token the token endpoint issued
    (`google_token.ISSUED`; 401 `authentication_error` without one)."""

    async def messages(request: web.Request) -> web.StreamResponse:
        state = request.app[state_key]
        env = Env(clock=state.clock, stopping=state.stopping, received_mono_s=time.monotonic())
        raw = await request.read()
        try:
            body: object = json.loads(raw)
        except ValueError:
            body = None
        version = request.headers.get("anthropic-version")
        api_key = request.headers.get("x-api-key") or credentials.bearer(request.headers.get("authorization"))
        if vertex:
            model_name, _, method = request.match_info["call"].rpartition(":")
            if model_name == VERTEX_COUNT:
                return _vertex_count(request, body, method)
            if isinstance(body, dict):
                version = body.pop("anthropic_version", None) if method in VERTEX_METHODS else None
                body = {**body, "model": model_name}
            version = version if version == VERTEX_VERSION else None
            if api_key not in request.app[ISSUED]:
                api_key = None
        fields = body if isinstance(body, dict) else {}
        model = fields.get("model")
        attempt = state.log.record(
            t_s=state.clock(),
            model=model if isinstance(model, str) else None,
            stream=fields.get("stream") is True,
            authorization=api_key,
            request_id=request.headers.get("x-request-id"),
        )
        attempt.received = {
            "body": raw.decode("utf-8", "replace"),
            "headers": {k.lower(): v for k, v in request.headers.items() if k.lower().startswith("anthropic-")},
        }
        try:
            resp = await _admit(request, state, env, attempt, body, api_key, version)
            return await deliver(request, resp, attempt, env)
        except asyncio.CancelledError:
            attempt.finish(End.FAULT, state.clock())
            raise

    return messages


async def count_tokens(request: web.Request) -> web.Response:
    """`POST /v1/messages/count_tokens`: `{"input_tokens": N}`, N counted as the
    messages' prompt tokens are (whitespace-separated words of system and
    message text). Needs a key and `anthropic-version`; not logged (no attempt)."""
    api_key = request.headers.get("x-api-key") or credentials.bearer(request.headers.get("authorization"))
    if not api_key or not api_key.strip():
        return web.json_response(wire.error("authentication_error", "x-api-key header is required"), status=401)
    if not request.headers.get("anthropic-version"):
        return web.json_response(
            wire.error("invalid_request_error", "anthropic-version: header is required"), status=400
        )
    try:
        body = json.loads(await request.read())
        req = wire.parse_request({**body, "max_tokens": 1} if isinstance(body, dict) else body)
    except (ValueError, wire.RequestError) as exc:
        return web.json_response(wire.error("invalid_request_error", str(exc)), status=400)
    return web.json_response({"input_tokens": req.chat.prompt_tokens})


async def _admit(
    request: web.Request,
    state: Any,
    env: Env,
    attempt: Attempt,
    body: object,
    api_key: str | None,
    version: str | None,
) -> web.StreamResponse:
    def reject(status: int, error: wire.ErrorBody) -> web.Response:
        attempt.status = status
        return _json(env, status, error)

    if not api_key or not api_key.strip():
        return reject(401, wire.error("authentication_error", "x-api-key header is required"))
    if credentials.revoked(api_key):
        return reject(401, wire.status_error(401, ""))
    if not version:
        return reject(400, wire.error("invalid_request_error", "anthropic-version: header is required"))
    try:
        req = wire.parse_request(body)
    except wire.RequestError as exc:
        return reject(400, exc.body)
    header = request.headers.get(SCENARIO_HEADER)
    try:
        steps = scenario_for(req.model, header)
    except ValueError as exc:
        return reject(400, wire.error("invalid_request_error", f"Invalid simulator scenario: {exc}"))
    turn = state.cursors.turn((req.model, header), steps, attempt.t_s, seed=state.seed)
    attempt.step = turn.step.token
    return await answer(request, req, turn.step, verdict=turn.verdict, attempt=attempt, env=env)
