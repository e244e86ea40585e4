"""The simulator's Gemini API and Vertex AI Gemini routes.

Owns: admitting a `generateContent` / `streamGenerateContent?alt=sse` request —
`POST /v1beta/models/{model}:{method}` (or `/v1/...`) with the key in `x-goog-api-key` (or `?key=`): none is
Google's 403 `PERMISSION_DENIED` ("Method doesn't allow unregistered callers ..."), a revoked
one (`credentials`) the 400 `INVALID_ARGUMENT` "API key not valid" with `ErrorInfo.reason:
API_KEY_INVALID`; `POST /v1/projects/{p}/locations/{l}/publishers/google/models/{model}:{method}`
with `Authorization: Bearer` a token this simulator's token endpoint issued
(`google_token`), else 401 `UNAUTHENTICATED` — logging it (`/sim/log`, the body kept as
`received`), and applying its scenario step (the model named in the URL) in Google's wire
format:

- bare statuses answer Google's bodies (`429` `RESOURCE_EXHAUSTED`, `503` `UNAVAILABLE`
  "The model is overloaded", `500` `INTERNAL`, `504` `DEADLINE_EXCEEDED`, ...); `down`,
  `fail<P>` and `cap<N>` answer 503 `UNAVAILABLE`;
- `429ra<N>` (and `429rad`, `429ram`, `429rr`) is the 429 `RESOURCE_EXHAUSTED` with a
  `RetryInfo` `retryDelay` of N s (Google sends no `Retry-After`); `quota` / `usagecap` the
  same without a delay;
- `ctx` is the 400 "The input token count (N) exceeds the maximum number of tokens allowed";
- `safety` and `cf200` answer 200 with a candidate the safety filters ended
  (`finishReason: SAFETY`, no content; one event when streamed); `policy` and `cf400` a
  blocked prompt (`promptFeedback.blockReason: SAFETY` / `PROHIBITED_CONTENT`, no candidate);
- `bodyerr` / `bodyerr429` send Google's 503 / 429 error object with 200 (the stream's first
  event); `nodone` leaves out the last event (the one with the `finishReason`) and closes;
- `reset`, `close`, `hang`, `slow`, `cut`, `stall`, `badchunk`, `i<N>`, `+<N>ms` and `len<N>`
  behave as on the other routes (counts over the content events).
`...:batchEmbedContents` (the Gemini API's embeddings) takes the same steps, its success one
unit vector per text (as `/v1/embeddings` makes them); so does Vertex AI's `...:predict` (its
text-embedding models: `instances[].content` in, `predictions[].embeddings.values` and
`.statistics.token_count` out). Events are framed
`data: {GenerateContentResponse}\\r\\n\\r\\n`. `...:countTokens` answers
`{"totalTokens": N}` (the words of the request's texts), not logged; Vertex AI's takes the
request's fields only (a `generateContentRequest` is the Gemini API's: 400 on Vertex AI).
Must not import: turnout's gateway packages.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from turnout_sim import credentials, sse_stream
from turnout_sim import gemini_wire as wire
from turnout_sim.attempt_log import Attempt, End
from turnout_sim.faults import Verdict
from turnout_sim.google_token import ISSUED
from turnout_sim.openai_steps import Env, before_head, deliver, ended, send_json
from turnout_sim.openai_wire import RequestError
from turnout_sim.scenarios import Step, StepKind, scenario_for

SCENARIO_HEADER = "x-sim-scenario"
METHODS = ("generateContent", "streamGenerateContent", "batchEmbedContents", "predict")
"""The methods that are model calls (logged, a scenario step consumed); `countTokens` is answered apart."""
_DURATION_UNITS_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_RETRY_KINDS = frozenset(
    {StepKind.RETRY_AFTER, StepKind.RETRY_AFTER_DATE, StepKind.RETRY_AFTER_MS, StepKind.RESET_REQUESTS}
)


def _json(env: Env, status: int, body: object) -> web.Response:
    processing_ms = int((time.monotonic() - env.received_mono_s) * 1000)
    return web.Response(
        status=status,
        body=json.dumps(body, indent=2).encode(),
        content_type="application/json",
        headers={"server-timing": f"gfet4t7; dur={processing_ms}", "vary": "Origin, X-Origin, Referer"},
    )


def _retry_seconds(step: Step) -> float:
    if step.seconds is not None:
        return float(step.seconds)
    if step.delay_ms is not None:
        return step.delay_ms / 1000
    found = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", step.duration or "")
    return sum(float(n) * _DURATION_UNITS_S[u] for n, u in found)


def error_for(step: Step, req: wire.GeminiRequest, verdict: Verdict) -> tuple[int, wire.ErrorBody] | None:
    """The (status, body) of an error step or verdict (module doc), or None for a 200."""
    kind = step.kind
    if verdict in (Verdict.UNAVAILABLE, Verdict.OVERLOADED):
        return 503, wire.status_error(503, req.model)
    if kind is StepKind.ERROR:
        assert step.status is not None
        return step.status, wire.status_error(step.status, req.model)
    if kind in _RETRY_KINDS:
        return 429, wire.retry_error(_retry_seconds(step))
    if kind in (StepKind.QUOTA, StepKind.USAGE_CAP, StepKind.RATE_LIMIT_403):
        return 429, wire.quota_error()
    if kind is StepKind.CONTEXT:
        return 400, wire.context_error(req.chat.prompt_tokens)
    return None


def _blocked(step: Step, req: wire.GeminiRequest, response_id: str) -> dict[str, Any] | None:
    """The 200 body of a safety step, or None."""
    if step.kind is StepKind.FILTERED:
        return wire.safety_finished(req, response_id=response_id)
    if step.kind in (StepKind.POLICY, StepKind.PROMPT_FILTER):
        reason = "PROHIBITED_CONTENT" if step.kind is StepKind.PROMPT_FILTER else "SAFETY"
        return wire.prompt_blocked(req, response_id=response_id, reason=reason)
    return None


def _body_error(step: Step, model: str) -> wire.ErrorBody:
    return wire.quota_error() if step.kind is StepKind.BODY_ERROR_429 else wire.status_error(503, model)


async def _answer_stream(
    request: web.Request, req: wire.GeminiRequest, step: Step, attempt: Attempt, env: Env, response_id: str
) -> web.StreamResponse:
    resp = sse_stream.open_stream({}, step)
    await resp.prepare(request)
    blocked = _blocked(step, req, response_id)
    if blocked is not None or step.kind in (StepKind.BODY_ERROR, StepKind.BODY_ERROR_429):
        await resp.write(wire.sse_event(blocked if blocked is not None else _body_error(step, req.model)))
        await resp.write_eof()
        return resp
    *content, last = wire.stream_events(req, response_id=response_id)
    frames = [sse_stream.Frame(wire.sse_event(event), content=True) for event in content]
    return await sse_stream.write(
        request, resp, frames, step, attempt, env, terminator=wire.sse_event(last), malformed=wire.MALFORMED_EVENT
    )


async def answer(
    request: web.Request,
    req: wire.GeminiRequest,
    step: Step,
    *,
    verdict: Verdict,
    attempt: Attempt,
    env: Env,
    embed: tuple[list[str], int | None] | None = None,
    predict: bool = False,
) -> web.StreamResponse:
    """Answer a `generateContent` request according to `step` (see the module doc); with `embed`
    (texts, dimensions) a `batchEmbedContents` one, whose success is `wire.embeddings` (with
    `predict`, Vertex AI's `:predict`: `wire.predictions`)."""
    gone = await before_head(request, step, attempt, env)
    if gone is not None:
        return gone
    error = error_for(step, req, verdict)
    if error is not None:
        attempt.status = error[0]
        return _json(env, *error)
    attempt.status = 200
    if step.answer_tokens is not None:
        req = wire.with_answer_length(req, step.answer_tokens)
    response_id = f"sim{attempt.seq:012d}"
    try:
        if req.stream:
            return await _answer_stream(request, req, step, attempt, env, response_id)
        blocked = _blocked(step, req, response_id)
        body = blocked if blocked is not None else wire.answer(req, response_id=response_id)
        if embed is not None:
            body = (wire.predictions if predict else wire.embeddings)(req.model, *embed)
        error_body = json.dumps(_body_error(step, req.model)).encode()
        return await send_json(request, json.dumps(body).encode(), step, attempt, env, error_body=error_body)
    except ConnectionError:
        ended(attempt, env, End.CLIENT_GONE)
        return web.Response()


def _credential_refusal(request: web.Request, vertex: bool) -> tuple[int, wire.ErrorBody] | None:
    """Why the request's credential is refused (module doc), or None."""
    if vertex:
        token = credentials.bearer(request.headers.get("authorization"))
        return None if token is not None and token in request.app[ISSUED] else (401, wire.status_error(401, ""))
    key = request.headers.get("x-goog-api-key") or request.query.get("key") or ""
    if not key.strip():
        return 403, wire.error(403, wire.NO_KEY)
    if credentials.revoked(key):
        return 400, wire.key_invalid_error()
    return None


def _count_tokens(request: web.Request, env: Env, raw: bytes, vertex: bool) -> web.Response:
    """`...:countTokens`: `{"totalTokens": N}`, N the words of the request's texts (`contents`
    and `systemInstruction`, given as is or inside `generateContentRequest`), as the answers'
    `promptTokenCount` counts them; the credential checked as for a call; not logged."""
    refusal = _credential_refusal(request, vertex)
    if refusal is not None:
        return _json(env, *refusal)
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    inner = wire.field(body, "generateContentRequest") or body
    if vertex and inner is not body:
        unknown = 'Invalid JSON payload received. Unknown name "generateContentRequest": Cannot find field.'
        return _json(env, 400, wire.error(400, unknown))
    try:
        req = wire.parse_request(inner, "count", stream=False)
    except RequestError as exc:
        return _json(env, 400, exc.body)
    return _json(env, 200, {"totalTokens": req.chat.prompt_tokens})


def route(state_key: web.AppKey[Any], *, vertex: bool) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """The handler of `.../models/{call}` (`call` = `{model}:{method}`) over the app's `SimState`:
    the Gemini API's (`vertex` False) or Vertex AI's Google publisher (True)."""

    async def handler(request: web.Request) -> web.StreamResponse:
        state = request.app[state_key]
        env = Env(clock=state.clock, stopping=state.stopping, received_mono_s=time.monotonic())
        model, _, method = request.match_info["call"].rpartition(":")
        raw = await request.read()
        if method == "countTokens":
            return _count_tokens(request, env, raw, vertex)
        stream = method == "streamGenerateContent"
        credential = (
            request.headers.get("authorization") if vertex else request.headers.get("x-goog-api-key")
        ) or request.query.get("key")
        attempt = state.log.record(
            t_s=state.clock(),
            model=model or None,
            stream=stream,
            authorization=credential,
            request_id=request.headers.get("x-request-id"),
        )
        attempt.received = {"body": raw.decode("utf-8", "replace"), "headers": {}}
        try:
            resp = await _admit(request, state, env, attempt, raw, model, method, vertex)
            return await deliver(request, resp, attempt, env)
        except asyncio.CancelledError:
            attempt.finish(End.FAULT, state.clock())
            raise

    return handler


async def _admit(
    request: web.Request,
    state: Any,
    env: Env,
    attempt: Attempt,
    raw: bytes,
    model: str,
    method: str,
    vertex: bool,
) -> web.StreamResponse:
    def reject(status: int, body: wire.ErrorBody) -> web.Response:
        attempt.status = status
        return _json(env, status, body)

    if method not in METHODS or not model or (method == "predict" and not vertex):
        return reject(404, wire.error(404, f"Method not found: {method or request.path}"))
    refusal = _credential_refusal(request, vertex)
    if refusal is not None:
        return reject(*refusal)
    stream = method == "streamGenerateContent"
    if stream and request.query.get("alt") != "sse":
        return reject(400, wire.error(400, "The simulator streams with alt=sse only."))
    try:
        body: object = json.loads(raw)
    except ValueError:
        body = None
    embed = None
    try:
        if method in ("batchEmbedContents", "predict"):
            embed = (wire.predict_texts if method == "predict" else wire.batch_texts)(body)
            body = {"contents": [{"parts": [{"text": text}]} for text in embed[0]]}  # its size, for the steps
        req = wire.parse_request(body, model, stream=stream)
    except RequestError as exc:
        return reject(400, exc.body)
    header = request.headers.get(SCENARIO_HEADER)
    try:
        steps = scenario_for(model, header)
    except ValueError as exc:
        return reject(400, wire.error(400, f"Invalid simulator scenario: {exc}"))
    turn = state.cursors.turn((model, header), steps, attempt.t_s, seed=state.seed)
    attempt.step = turn.step.token
    return await answer(
        request,
        req,
        turn.step,
        verdict=turn.verdict,
        attempt=attempt,
        env=env,
        embed=embed,
        predict=method == "predict",
    )
