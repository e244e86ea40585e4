"""Apply one scenario step to an OpenAI chat completion request over HTTP.

Owns: turning a parsed `Step` into what goes on the wire for
`POST /v1/chat/completions` — error answers with their headers, JSON and SSE
successes (continuing an assistant prefill), the mid-body faults (slow, cut,
stall, badchunk, nodone), and recording how each request's connection ended
(`Attempt.finish`).
Must not import: scenario parsing details beyond `Step`/`StepKind`; socket
tricks live in `connection`, bytes in `openai_wire`.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
import uuid
from dataclasses import dataclass

from aiohttp import web

from turnout_sim import connection
from turnout_sim import openai_errors as errors
from turnout_sim import openai_wire as wire
from turnout_sim.attempt_log import Attempt, End
from turnout_sim.clock import Clock
from turnout_sim.faults import Verdict
from turnout_sim.scenarios import Step, StepKind

_SOCKET_FAULTS = frozenset({StepKind.RESET, StepKind.CLOSE, StepKind.HANG})


@dataclass(frozen=True, slots=True)
class Env:
    """What a handler needs from the app.

    Attributes:
        clock: wall clock, epoch seconds (`created`, HTTP-dates).
        stopping: set when the server shuts down (ends held connections).
        received_mono_s: `time.monotonic()` at receipt, seconds, for the
            `openai-processing-ms` header.
    """

    clock: Clock
    stopping: asyncio.Event
    received_mono_s: float


def _ended(attempt: Attempt, env: Env, end: End) -> None:
    attempt.finish(end, env.clock())


async def _pause(request: web.Request, attempt: Attempt, env: Env, seconds: float) -> bool:
    """Sleep `seconds` unless the client leaves; False (and logged) if it did."""
    if await connection.pause(request, seconds):
        return True
    _ended(attempt, env, End.CLIENT_GONE)
    return False


async def _hold(request: web.Request, attempt: Attempt, env: Env) -> None:
    """Hold the connection until the client leaves or the server stops."""
    client_left = await connection.wait_for_disconnect(request, env.stopping)
    _ended(attempt, env, End.CLIENT_GONE if client_left else End.FAULT)


def _fault_close(request: web.Request, attempt: Attempt, env: Env) -> None:
    connection.close(request)
    _ended(attempt, env, End.FAULT)


async def deliver(request: web.Request, resp: web.StreamResponse, attempt: Attempt, env: Env) -> web.StreamResponse:
    """Finish writing a handler's response and record how the request ended.

    If the end is already recorded (fault, client gone) `resp` is returned
    untouched. Otherwise it is prepared and completed here, not later by
    aiohttp, so `end = "complete"` is logged only once every byte has been
    handed to the transport, and a client that left shows as `client_gone`.

    Args:
        request: the request being answered.
        resp: what the handler returned.
        attempt: the log entry to finish.
        env: handler environment.

    Returns:
        `resp`, for the handler to return to aiohttp.
    """
    if attempt.end is not None:
        return resp
    try:
        await resp.prepare(request)
        await resp.write_eof()
    except ConnectionError:
        _ended(attempt, env, End.CLIENT_GONE)
        return resp
    _ended(attempt, env, End.COMPLETE)
    return resp


def _base_headers(env: Env) -> dict[str, str]:
    processing_ms = int((time.monotonic() - env.received_mono_s) * 1000)
    return {
        "x-request-id": f"req_{uuid.uuid4().hex}",
        "openai-version": "2020-10-01",
        "openai-processing-ms": str(processing_ms),
    }


def json_response(env: Env, status: int, body: object, headers: dict[str, str] | None = None) -> web.Response:
    """A complete JSON answer with OpenAI's usual headers.

    Args:
        env: handler environment.
        status: HTTP status.
        body: JSON-serialisable body.
        headers: extra headers (Retry-After, ...).
    """
    all_headers = _base_headers(env) | (headers or {})
    return web.Response(
        status=status,
        body=wire.json_bytes(body),
        content_type="application/json",
        headers=all_headers,
    )


def _error_for(
    step: Step, req: wire.ChatRequest, verdict: Verdict, env: Env
) -> tuple[int, errors.ErrorBody, dict[str, str]] | None:
    """The (status, body, headers) of an error step, or None for a success."""
    kind, model = step.kind, req.model
    if verdict is Verdict.UNAVAILABLE:  # down window, fail roll
        return 503, errors.status_error(503, model), {}
    if verdict is Verdict.OVERLOADED:  # over cap<N>
        return 503, errors.overloaded_error(), {"retry-after": "1"}
    if kind is StepKind.ERROR:
        assert step.status is not None
        return step.status, errors.status_error(step.status, model), {}
    if kind is StepKind.RETRY_AFTER:
        return (
            429,
            errors.rate_limit_error(model, f"{step.seconds}s"),
            {"retry-after": str(step.seconds)},
        )
    if kind is StepKind.RETRY_AFTER_DATE:
        assert step.seconds is not None
        date = email.utils.formatdate(env.clock() + step.seconds, usegmt=True)
        return (
            429,
            errors.rate_limit_error(model, f"{step.seconds}s"),
            {"retry-after": date},
        )
    if kind is StepKind.RETRY_AFTER_MS:
        return (
            429,
            errors.rate_limit_error(model, f"{step.delay_ms}ms"),
            {"retry-after-ms": str(step.delay_ms)},
        )
    if kind is StepKind.RESET_REQUESTS:
        assert step.duration is not None
        headers = {
            "x-ratelimit-limit-requests": "3",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": step.duration,
        }
        return 429, errors.rate_limit_error(model, step.duration), headers
    if kind is StepKind.USAGE_CAP:
        assert step.duration is not None
        headers = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": step.duration}
        return 429, errors.usage_cap_error(step.duration), headers
    if kind is StepKind.RATE_LIMIT_403:
        return 403, errors.rate_limit_403_error(model), {}
    if kind is StepKind.QUOTA:
        return 429, errors.quota_error(), {}
    if kind is StepKind.NO_PREFILL:
        if req.prefill is not None:
            return 400, errors.prefill_unsupported_error(), {}
        return None
    if kind is StepKind.CONTEXT:
        return 400, errors.context_length_error(req.prompt_tokens), {}
    if kind is StepKind.POLICY:
        return 400, errors.content_policy_error(), {}
    return None


async def answer(
    request: web.Request,
    req: wire.ChatRequest,
    step: Step,
    *,
    verdict: Verdict,
    attempt: Attempt,
    env: Env,
) -> web.StreamResponse:
    """Answer a chat completion request according to `step`.

    Waits `step.latency_ms` first, then sends the step's error, fault or
    success, updating `attempt.status` once it is decided (it stays None for
    reset/close/hang, and when the client leaves during the latency).
    Records the attempt's end for faults and departed clients; otherwise
    the caller completes the response with `deliver`.

    Args:
        request: the aiohttp request (its transport is used for faults).
        req: the parsed request fields.
        step: the step this request consumed.
        verdict: the turn's verdict (`down`, `fail`, `cap`; see `faults`);
            `Verdict.SERVE` for every other step.
        attempt: the log entry to update.
        env: handler environment.

    Returns:
        The response aiohttp should finish (a dead one after socket faults).
    """
    if step.latency_ms and not await _pause(request, attempt, env, step.latency_ms / 1000):
        return web.Response()  # nobody left to answer
    if step.kind in _SOCKET_FAULTS:
        if step.kind is StepKind.RESET:
            connection.reset(request)
            _ended(attempt, env, End.FAULT)
        elif step.kind is StepKind.CLOSE:
            _fault_close(request, attempt, env)
        else:
            await _hold(request, attempt, env)
        return web.Response()  # its write fails quietly on the closed transport
    error = _error_for(step, req, verdict, env)
    if error is not None:
        status, body, headers = error
        attempt.status = status
        return json_response(env, status, body, headers)
    attempt.status = 200
    if step.answer_tokens is not None:  # len<N>: the model's answer has a length of its own
        req = wire.with_answer_length(req, step.answer_tokens)
    completion_id = f"chatcmpl-sim{attempt.seq:012d}"
    created_s = int(env.clock())
    try:
        if req.stream:
            return await _stream(request, req, step, attempt, env, completion_id, created_s)
        return await _json(request, req, step, attempt, env, completion_id, created_s)
    except ConnectionError:  # the client left mid-answer (write to a closed transport)
        _ended(attempt, env, End.CLIENT_GONE)
        return web.Response()


async def _json(
    request: web.Request,
    req: wire.ChatRequest,
    step: Step,
    attempt: Attempt,
    env: Env,
    completion_id: str,
    created_s: int,
) -> web.StreamResponse:
    kind = step.kind
    if kind in (StepKind.BODY_ERROR, StepKind.BODY_ERROR_429):
        return json_response(env, 200, errors.body_error(kind is StepKind.BODY_ERROR_429, req.model))
    if kind is StepKind.BAD_CHUNK:
        body = b'{"id": "' + completion_id.encode() + b'", "object": "chat.completion", "choices": ['
    else:
        body = wire.json_bytes(wire.completion(req, completion_id=completion_id, created_s=created_s))
    if kind not in (StepKind.SLOW, StepKind.CUT, StepKind.STALL):
        return web.Response(
            status=200,
            body=body,
            content_type="application/json",
            headers=_base_headers(env),
        )
    resp = web.StreamResponse(status=200, headers=_base_headers(env))
    resp.content_type = "application/json"
    resp.content_length = len(body)
    await resp.prepare(request)  # StreamResponse sends the head right away
    if kind is StepKind.SLOW:
        if await _pause(request, attempt, env, (step.delay_ms or 0) / 1000):
            await resp.write(body)
            await resp.write_eof()
        return resp
    await resp.write(body[: len(body) // 2])
    if kind is StepKind.CUT:
        _fault_close(request, attempt, env)
    else:
        await _hold(request, attempt, env)
    return resp


async def _stream(
    request: web.Request,
    req: wire.ChatRequest,
    step: Step,
    attempt: Attempt,
    env: Env,
    completion_id: str,
    created_s: int,
) -> web.StreamResponse:
    kind = step.kind
    resp = web.StreamResponse(status=200, headers=_base_headers(env) | {"cache-control": "no-cache"})
    resp.content_type = "text/event-stream"
    resp.charset = "utf-8"
    resp.enable_chunked_encoding()
    if kind is StepKind.NO_DONE:
        resp.force_close()
    await resp.prepare(request)

    def chunk(
        delta: dict[str, object] | None = None,
        finish_reason: str | None = None,
        final_usage: bool = False,
        choice: int = 0,
    ) -> bytes:
        obj = wire.chunk(
            req,
            completion_id=completion_id,
            created_s=created_s,
            delta=delta,
            finish_reason=finish_reason,
            final_usage=final_usage,
            choice=choice,
        )
        return wire.sse_event(obj)

    if kind in (StepKind.BODY_ERROR, StepKind.BODY_ERROR_429):
        await resp.write(wire.sse_event(errors.body_error(kind is StepKind.BODY_ERROR_429, req.model)))
        await resp.write_eof()
        return resp
    for choice in range(req.n):
        await resp.write(chunk(delta={"role": "assistant", "content": "", "refusal": None}, choice=choice))
    if kind is StepKind.SLOW and not await _pause(request, attempt, env, (step.delay_ms or 0) / 1000):
        return resp
    pieces = wire.stream_pieces(req)  # after a matching prefill: the rest only
    stop_after = min(step.count or 0, len(pieces)) if kind in (StepKind.CUT, StepKind.STALL) else len(pieces)
    for index, (choice, piece) in enumerate(pieces[:stop_after]):
        # Between chunks, notice a departed client within one interval (a
        # write to its closed transport raises ConnectionError in any case).
        if index and step.interval_ms:
            if not await _pause(request, attempt, env, step.interval_ms / 1000):
                return resp
        if kind is StepKind.BAD_CHUNK and index + 1 == step.count:
            await resp.write(wire.MALFORMED_EVENT)
        else:
            await resp.write(chunk(delta={"content": piece}, choice=choice))
    if kind is StepKind.CUT:
        _fault_close(request, attempt, env)
        return resp
    if kind is StepKind.STALL:
        await _hold(request, attempt, env)
        return resp
    for choice in range(req.n):
        await resp.write(chunk(delta={}, finish_reason=wire.finish_reason(req), choice=choice))
    if req.include_usage:
        await resp.write(chunk(final_usage=True))
    if kind is not StepKind.NO_DONE:
        await resp.write(wire.SSE_DONE)
    await resp.write_eof()
    return resp
