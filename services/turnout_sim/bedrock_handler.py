"""`POST /model/{modelId}/converse` and `/converse-stream`: the simulator's Amazon Bedrock runtime.

Owns: admitting a Converse request (a SigV4 `Authorization`, checked by `sigv4_check`: 403
`UnrecognizedClientException` / `InvalidSignatureException` otherwise; JSON; the fields
`bedrock_wire` honours), logging it in the shared attempt log (`/sim/log`: the access key id
fingerprinted as the credential, the body as received and the `x-amz-*` headers kept as
`received`), and applying its scenario step (the model id is the scenario key:
`anthropic.claude-3-haiku-20240307-v1:0~429,200`) in Bedrock's wire format: JSON answers and
`x-amzn-ErrorType` errors, and ConverseStream's `application/vnd.amazon.eventstream` frames
(`eventstream`). The fault DSL is the OpenAI side's (`scenarios`); the Bedrock specifics:

- bare statuses answer AWS's errors (`bedrock_wire.ERRORS`: `429` ThrottlingException, `503`
  and `529` ServiceUnavailableException, `500` InternalServerException, `408`
  ModelTimeoutException, ...); `429ra<N>` and the other 429 steps, `usagecap`, `cap<N>` over
  capacity and `403rl` are ThrottlingException; `down` / `fail<P>` ServiceUnavailableException;
- `ctx`: 400 ValidationException "Input is too long for requested model."; `quota`: 400
  ServiceQuotaExceededException; `noprefill` with an assistant last turn: 400 ValidationException;
- `policy` and `cf400`: a guardrail intervenes (200, the guardrail's blocked message,
  `stopReason: guardrail_intervened`); `cf200`: the model's filter (`content_filtered`);
- `bodyerr` / `bodyerr429`: a stream's first message after `messageStart` is an exception
  (`modelStreamErrorException` / `throttlingException`); a complete answer gets 500 / 429;
- `badchunk<N>`: the N-th delta's frame has a wrong CRC32; `nodone`: the stream ends after the
  last `contentBlockStop` without `messageStop` or `metadata`;
- `reset`, `close`, `hang`, `slow`, `cut`, `stall`, `i<N>`, `len<N>` and `+<N>ms` as on the
  other routes (counts over the `contentBlockDelta` events).
`POST /model/{modelId}/count-tokens` (`CountTokens`, signed as the calls are) answers
`{"inputTokens": N}` for an `{"input": {"converse": {...}}}` body, N the prompt tokens the same
Converse request is answered with; not logged (counting is no model call).
Must not import: turnout's gateway packages.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from turnout_sim import anthropic_wire, eventstream, sigv4_check, step_faults
from turnout_sim import bedrock_wire as wire
from turnout_sim.attempt_log import Attempt, End
from turnout_sim.faults import Verdict
from turnout_sim.openai_steps import Env, deliver
from turnout_sim.scenarios import Step, StepKind, scenario_for

SCENARIO_HEADER = "x-sim-scenario"
_THROTTLES = frozenset(
    {
        StepKind.RETRY_AFTER,
        StepKind.RETRY_AFTER_DATE,
        StepKind.RETRY_AFTER_MS,
        StepKind.RESET_REQUESTS,
        StepKind.USAGE_CAP,
        StepKind.RATE_LIMIT_403,
    }
)
_GUARDRAIL_STOPS = {
    StepKind.POLICY: "guardrail_intervened",
    StepKind.PROMPT_FILTER: "guardrail_intervened",
    StepKind.FILTERED: "content_filtered",
}


def _json(env: Env, status: int, body: object, headers: dict[str, str] | None = None) -> web.Response:
    base = {"x-amzn-RequestId": str(uuid.uuid4())}
    return web.Response(
        status=status, body=json.dumps(body).encode(), content_type="application/json", headers=base | (headers or {})
    )


def _error(env: Env, error: wire.AwsError) -> web.Response:
    return _json(env, error.status, error.body(), error.headers())


def _error_for(step: Step, req: wire.ConverseRequest, verdict: Verdict) -> wire.AwsError | None:
    """The error of a step, or None for an answer."""
    kind = step.kind
    if verdict is Verdict.UNAVAILABLE:  # down window, fail roll
        return wire.status_error(503)
    if verdict is Verdict.OVERLOADED or kind in _THROTTLES:  # over cap<N>, 429 variants
        return wire.status_error(429)
    if kind is StepKind.ERROR:
        assert step.status is not None
        return wire.status_error(step.status)
    if kind is StepKind.QUOTA:
        return wire.AwsError(400, "ServiceQuotaExceededException", wire.QUOTA_MESSAGE)
    if kind is StepKind.CONTEXT:
        return wire.AwsError(400, "ValidationException", wire.CONTEXT_MESSAGE)
    if kind is StepKind.NO_PREFILL and req.chat.prefill is not None:
        return wire.AwsError(400, "ValidationException", "This model does not support assistant message prefill.")
    if not req.stream and kind in (StepKind.BODY_ERROR, StepKind.BODY_ERROR_429):
        return wire.status_error(429 if kind is StepKind.BODY_ERROR_429 else 500)
    return None


def _latency_ms(env: Env) -> int:
    return int((time.monotonic() - env.received_mono_s) * 1000)


async def _answer_json(
    request: web.Request, req: wire.ConverseRequest, step: Step, attempt: Attempt, env: Env
) -> web.StreamResponse:
    answer = wire.answer(req, seq=attempt.seq, latency_ms=_latency_ms(env), stop=_GUARDRAIL_STOPS.get(step.kind))
    body = json.dumps(answer).encode()
    if step.kind is StepKind.BAD_CHUNK:
        body = body[: len(body) // 2]
    if step.kind not in step_faults.HELD_BODIES:
        return (
            _json(env, 200, answer)
            if step.kind is not StepKind.BAD_CHUNK
            else web.Response(status=200, body=body, content_type="application/json")
        )
    return await step_faults.held_body(request, body, step, attempt, env, {"x-amzn-RequestId": str(uuid.uuid4())})


async def _answer_stream(
    request: web.Request, req: wire.ConverseRequest, step: Step, attempt: Attempt, env: Env
) -> web.StreamResponse:
    kind = step.kind
    resp = web.StreamResponse(status=200, headers={"x-amzn-RequestId": str(uuid.uuid4())})
    resp.content_type = eventstream.MEDIA_TYPE
    resp.enable_chunked_encoding()
    if kind is StepKind.NO_DONE:
        resp.force_close()
    await resp.prepare(request)
    for name, data in wire.opening_events(req, seq=attempt.seq):
        await resp.write(eventstream.event(name, data))
    if kind in (StepKind.BODY_ERROR, StepKind.BODY_ERROR_429):
        limited = kind is StepKind.BODY_ERROR_429
        await resp.write(
            eventstream.exception("throttlingException", wire.ERRORS[429][2])
            if limited
            else eventstream.exception("modelStreamErrorException", "The model encountered an error while streaming.")
        )
        await resp.write_eof()
        return resp
    if kind is StepKind.SLOW and not await step_faults.pause(request, attempt, env, (step.delay_ms or 0) / 1000):
        return resp
    stop = _GUARDRAIL_STOPS.get(kind)
    pieces = [wire.GUARDRAIL_TEXT] if stop is not None else anthropic_wire.pieces(req)
    stop_after = min(step.count or 0, len(pieces)) if kind in (StepKind.CUT, StepKind.STALL) else len(pieces)
    for index, piece in enumerate(pieces[:stop_after]):
        if index and step.interval_ms and not await step_faults.pause(request, attempt, env, step.interval_ms / 1000):
            return resp
        frame = eventstream.event(*wire.delta_event(req, piece))
        await resp.write(
            eventstream.corrupted(frame) if kind is StepKind.BAD_CHUNK and index + 1 == step.count else frame
        )
    if await step_faults.cut_or_stall(request, kind, attempt, env):
        return resp
    closing = wire.closing_events(req, latency_ms=_latency_ms(env), stop=stop, with_stop=kind is not StepKind.NO_DONE)
    for name, data in closing:
        await resp.write(eventstream.event(name, data))
    await resp.write_eof()
    return resp


async def answer(
    request: web.Request, req: wire.ConverseRequest, step: Step, *, verdict: Verdict, attempt: Attempt, env: Env
) -> web.StreamResponse:
    """Answer a Converse request according to `step` (see the module doc).

    Records the attempt's end for faults and departed clients; otherwise the caller completes
    the response with `deliver`.
    """
    if step.latency_ms and not await step_faults.pause(request, attempt, env, step.latency_ms / 1000):
        return web.Response()
    if step.kind in step_faults.SOCKET_FAULTS:
        return await step_faults.socket_fault(request, step.kind, attempt, env)
    error = _error_for(step, req, verdict)
    if error is not None:
        attempt.status = error.status
        return _error(env, error)
    attempt.status = 200
    if step.answer_tokens is not None:  # len<N>
        req = wire.with_answer_length(req, step.answer_tokens)
    try:
        if req.stream:
            return await _answer_stream(request, req, step, attempt, env)
        return await _answer_json(request, req, step, attempt, env)
    except ConnectionError:
        attempt.finish(End.CLIENT_GONE, env.clock())
        return web.Response()


def route(state_key: web.AppKey[Any], *, stream: bool) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """The `POST /model/{model}/converse` (`stream`: `/converse-stream`) handler over the app's
    `SimState` (at `state_key`)."""

    async def converse(request: web.Request) -> web.StreamResponse:
        state = request.app[state_key]
        env = Env(clock=state.clock, stopping=state.stopping, received_mono_s=time.monotonic())
        raw = await request.read()
        model = request.match_info["model"]
        headers = {k.lower(): v for k, v in request.headers.items()}
        signed = sigv4_check.check(request.method, f"{request.scheme}://{request.host}{request.raw_path}", headers, raw)
        attempt = state.log.record(
            t_s=state.clock(),
            model=model,
            stream=stream,
            authorization=signed.access_key_id if isinstance(signed, sigv4_check.Signed) else None,
            request_id=request.headers.get("x-request-id"),
        )
        attempt.received = {
            "body": raw.decode("utf-8", "replace"),
            "headers": {k: v for k, v in headers.items() if k.startswith("x-amz-") and k != "x-amz-security-token"},
        }
        try:
            resp = await _admit(request, state, env, attempt, raw, model, signed, stream=stream)
            return await deliver(request, resp, attempt, env)
        except asyncio.CancelledError:
            attempt.finish(End.FAULT, state.clock())
            raise

    return converse


async def _admit(
    request: web.Request,
    state: Any,
    env: Env,
    attempt: Attempt,
    raw: bytes,
    model: str,
    signed: sigv4_check.Signed | sigv4_check.Refused,
    *,
    stream: bool,
) -> web.StreamResponse:
    def reject(error: wire.AwsError) -> web.Response:
        attempt.status = error.status
        return _error(env, error)

    if isinstance(signed, sigv4_check.Refused):
        return reject(wire.AwsError(403, signed.error_type, signed.message))
    try:
        req = wire.parse_request(model, json.loads(raw), stream=stream)
    except ValueError as exc:  # JSON, UnicodeDecodeError, wire.RequestError
        error = exc.error if isinstance(exc, wire.RequestError) else wire.status_error(400)
        return reject(error)
    header = request.headers.get(SCENARIO_HEADER)
    try:
        steps = scenario_for(req.model, header)
    except ValueError as exc:
        return reject(wire.AwsError(400, "ValidationException", f"Invalid simulator scenario: {exc}"))
    turn = state.cursors.turn((req.model, header), steps, attempt.t_s, seed=state.seed)
    attempt.step = turn.step.token
    return await answer(request, req, turn.step, verdict=turn.verdict, attempt=attempt, env=env)


def count_route(state_key: web.AppKey[Any]) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The `POST /model/{model}/count-tokens` handler (module doc): the signature checked as a
    call's (403 otherwise), `{"inputTokens": N}` or a 400 `ValidationException`; no attempt logged."""

    async def count_tokens(request: web.Request) -> web.Response:
        state = request.app[state_key]
        env = Env(clock=state.clock, stopping=state.stopping, received_mono_s=time.monotonic())
        raw = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        url = f"{request.scheme}://{request.host}{request.raw_path}"
        signed = sigv4_check.check(request.method, url, headers, raw)
        if isinstance(signed, sigv4_check.Refused):
            return _error(env, wire.AwsError(403, signed.error_type, signed.message))
        try:
            counted = wire.count_input(request.match_info["model"], json.loads(raw))
        except ValueError as exc:  # JSON, UnicodeDecodeError, wire.RequestError
            return _error(env, exc.error if isinstance(exc, wire.RequestError) else wire.status_error(400))
        return _json(env, 200, {"inputTokens": counted})

    return count_tokens
