"""The fault half of a scenario step on any OpenAI route (chat, embeddings, responses).

Owns: what every OpenAI route does with a step before and around its
success body — the handler environment (`Env`), OpenAI's usual response
headers, the `+<N>ms` latency, the socket faults (`reset`, `close`,
`hang`), the error answers of every error step and verdict (statuses,
Retry-After forms, quota, ctx, policy, noprefill, `down` / `fail` / `cap`),
the faults of a JSON success body (`bodyerr`, `badchunk`, `slow`, `cut`,
`stall`) and completing a response (`deliver`) so `/sim/log` records how it
ended. A route only builds its success bytes; the scenario machinery
(`scenarios`, `faults`, `attempt_log`) is the same for all of them.
Must not import: any route's wire module (`openai_wire`, `embeddings_wire`,
`responses_wire`); error bodies come from `openai_errors`.
Sources: https://platform.openai.com/docs/guides/error-codes,
https://platform.openai.com/docs/guides/rate-limits (headers).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import time
import uuid
from dataclasses import dataclass

from aiohttp import web

from turnout_sim import azure_errors, connection
from turnout_sim import openai_errors as errors
from turnout_sim.attempt_log import Attempt, End
from turnout_sim.clock import Clock
from turnout_sim.faults import Verdict
from turnout_sim.scenarios import Step, StepKind

SOCKET_FAULTS = frozenset({StepKind.RESET, StepKind.CLOSE, StepKind.HANG})
"""Steps that answer with no HTTP response at all."""


@dataclass(frozen=True, slots=True)
class Env:
    """What a handler needs from the app.

    Attributes:
        clock: wall clock, epoch seconds (`created`, HTTP-dates).
        stopping: set when the server shuts down (ends held connections).
        received_mono_s: `time.monotonic()` at receipt, seconds, for the
            `openai-processing-ms` header.
        azure: what an Azure OpenAI route was asked (its 429s are worded as Azure's),
            or None on the OpenAI routes.
    """

    clock: Clock
    stopping: asyncio.Event
    received_mono_s: float
    azure: azure_errors.AzureCall | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Asked:
    """What the error steps quote from a request, whatever its route.

    Attributes:
        model: the requested model name (quoted by 404 and rate-limit bodies).
        prompt_tokens: the request's input size in tokens (quoted by `ctx`).
        prefill: whether the request carries an assistant prefill (`noprefill`
            refuses it); False on routes without one.
    """

    model: str
    prompt_tokens: int
    prefill: bool = False


def json_bytes(obj: object) -> bytes:
    """A JSON response body (pretty-printed like OpenAI's, UTF-8)."""
    return json.dumps(obj, indent=2).encode("utf-8")


def ended(attempt: Attempt, env: Env, end: End) -> None:
    """Record that the request ended now, as `end` (first call counts)."""
    attempt.finish(end, env.clock())


async def pause(request: web.Request, attempt: Attempt, env: Env, seconds: float) -> bool:
    """Sleep `seconds` (s) unless the client leaves; False (and logged) if it did."""
    if await connection.pause(request, seconds):
        return True
    ended(attempt, env, End.CLIENT_GONE)
    return False


async def hold(request: web.Request, attempt: Attempt, env: Env) -> None:
    """Hold the connection until the client leaves or the server stops (`hang`, `stall`)."""
    client_left = await connection.wait_for_disconnect(request, env.stopping)
    ended(attempt, env, End.CLIENT_GONE if client_left else End.FAULT)


def fault_close(request: web.Request, attempt: Attempt, env: Env) -> None:
    """Close the connection mid-answer (`close`, `cut<N>`), logged as a fault."""
    connection.close(request)
    ended(attempt, env, End.FAULT)


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
        ended(attempt, env, End.CLIENT_GONE)
        return resp
    ended(attempt, env, End.COMPLETE)
    return resp


def base_headers(env: Env) -> dict[str, str]:
    """OpenAI's usual response headers: `x-request-id`, `openai-version`,
    `openai-processing-ms` (ms since receipt)."""
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
    return web.Response(
        status=status,
        body=json_bytes(body),
        content_type="application/json",
        headers=base_headers(env) | (headers or {}),
    )


def _retry_after_error(step: Step, model: str, env: Env) -> tuple[int, errors.ErrorBody, dict[str, str]] | None:
    kind = step.kind
    if kind is StepKind.RETRY_AFTER:
        return 429, errors.rate_limit_error(model, f"{step.seconds}s"), {"retry-after": str(step.seconds)}
    if kind is StepKind.RETRY_AFTER_DATE:
        date = email.utils.formatdate(env.clock() + (step.seconds or 0), usegmt=True)
        return 429, errors.rate_limit_error(model, f"{step.seconds}s"), {"retry-after": date}
    if kind is StepKind.RETRY_AFTER_MS:
        return 429, errors.rate_limit_error(model, f"{step.delay_ms}ms"), {"retry-after-ms": str(step.delay_ms)}
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
    return None


def error_for(
    step: Step, asked: Asked, verdict: Verdict, env: Env
) -> tuple[int, errors.ErrorBody, dict[str, str]] | None:
    """The (status, body, headers) of an error step or verdict, or None for a success; on an
    Azure route (`env.azure`) a 429 of the `429*` steps is Azure's (`azure_errors.rate_limit_error`,
    quoting the wait in whole seconds), its headers the step's.

    Args:
        step: the step the request consumed.
        asked: what the bodies quote from the request.
        verdict: the turn's verdict (`down`, `fail`, `cap`).
        env: handler environment (its clock dates `429rad<N>`).
    """
    kind, model = step.kind, asked.model
    if verdict is Verdict.UNAVAILABLE:  # down window, fail roll
        return 503, errors.status_error(503, model), {}
    if verdict is Verdict.OVERLOADED:  # over cap<N>
        return 503, errors.overloaded_error(), {"retry-after": "1"}
    if kind is StepKind.ERROR:
        assert step.status is not None
        hint = {"x-should-retry": step.should_retry} if step.should_retry is not None else {}
        return step.status, errors.status_error(step.status, model), hint
    limited = _retry_after_error(step, model, env)
    if limited is not None:
        if env.azure is not None:
            wait_s = step.seconds if step.seconds is not None else -(-(step.delay_ms or 1000) // 1000)
            return 429, azure_errors.rate_limit_error(env.azure, wait_s), limited[2]
        return limited
    if kind is StepKind.RATE_LIMIT_403:
        return 403, errors.rate_limit_403_error(model), {}
    if kind is StepKind.QUOTA:
        return 429, errors.quota_error(), {}
    if kind is StepKind.NO_PREFILL and asked.prefill:
        return 400, errors.prefill_unsupported_error(), {}
    if kind is StepKind.CONTEXT:
        return 400, errors.context_length_error(asked.prompt_tokens), {}
    if kind is StepKind.POLICY:
        return 400, errors.content_policy_error(), {}
    if kind is StepKind.PROMPT_FILTER:
        return 400, azure_errors.prompt_filter_error(), {}
    return None


async def before_head(request: web.Request, step: Step, attempt: Attempt, env: Env) -> web.StreamResponse | None:
    """Wait `step.latency_ms`, then perform a socket fault (`reset`, `close`, `hang`), whatever the wire.

    Returns:
        A dead response to finish (with `deliver`) when the connection is gone (the fault's,
        or a client that left during the wait), else None: the route answers the step.
    """
    if step.latency_ms and not await pause(request, attempt, env, step.latency_ms / 1000):
        return web.Response()  # nobody left to answer
    if step.kind in SOCKET_FAULTS:
        if step.kind is StepKind.RESET:
            connection.reset(request)
            ended(attempt, env, End.FAULT)
        elif step.kind is StepKind.CLOSE:
            fault_close(request, attempt, env)
        else:
            await hold(request, attempt, env)
        return web.Response()  # its write fails quietly on the closed transport
    return None


async def before_success(
    request: web.Request, step: Step, asked: Asked, *, verdict: Verdict, attempt: Attempt, env: Env
) -> web.StreamResponse | None:
    """Apply the part of `step` that comes before any success byte.

    Waits `step.latency_ms`, then performs a socket fault or builds the
    step's error answer, setting `attempt.status` once decided (it stays
    None for reset/close/hang and when the client leaves during the wait).

    Returns:
        The response to finish (with `deliver`) when the step answered here
        — a dead one after socket faults or a departed client, an error
        otherwise — or None when the route should send its success (then
        `attempt.status` is 200).
    """
    gone = await before_head(request, step, attempt, env)
    if gone is not None:
        return gone
    error = error_for(step, asked, verdict, env)
    if error is not None:
        status, body, headers = error
        attempt.status = status
        return json_response(env, status, body, headers)
    attempt.status = 200
    return None


async def send_json(
    request: web.Request,
    body: bytes,
    step: Step,
    attempt: Attempt,
    env: Env,
    *,
    error_body: bytes,
    malformed: bytes | None = None,
) -> web.StreamResponse:
    """Send a JSON success body under the body-level faults of `step`.

    `bodyerr` / `bodyerr429` send `error_body` with 200 instead; `badchunk`
    sends `malformed` (default: the first half of `body`, truncated JSON)
    with 200; `slow<ms>` sends the head, waits, then the body; `cut<N>` sends
    the head and half the body and closes; `stall<N>` sends the same and
    holds the connection. Any other step sends `body` as is.

    Args:
        request: the request being answered.
        body: the success body, UTF-8 JSON.
        step: the step the request consumed.
        attempt: its log entry (ends recorded here for faults).
        env: handler environment.
        error_body: the 200 body of `bodyerr` / `bodyerr429` (the route's
            choice: an error envelope, or a failed object).
        malformed: the `badchunk` body, or None for half of `body`.
    """
    kind = step.kind
    if kind in (StepKind.BODY_ERROR, StepKind.BODY_ERROR_429):
        body = error_body
    elif kind is StepKind.BAD_CHUNK:
        body = body[: len(body) // 2] if malformed is None else malformed
    if kind not in (StepKind.SLOW, StepKind.CUT, StepKind.STALL):
        return web.Response(status=200, body=body, content_type="application/json", headers=base_headers(env))
    resp = web.StreamResponse(status=200, headers=base_headers(env))
    resp.content_type = "application/json"
    resp.content_length = len(body)
    await resp.prepare(request)  # StreamResponse sends the head right away
    if kind is StepKind.SLOW:
        if await pause(request, attempt, env, (step.delay_ms or 0) / 1000):
            await resp.write(body)
            await resp.write_eof()
        return resp
    await resp.write(body[: len(body) // 2])
    if kind is StepKind.CUT:
        fault_close(request, attempt, env)
    else:
        await hold(request, attempt, env)
    return resp
