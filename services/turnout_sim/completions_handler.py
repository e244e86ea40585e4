"""`POST /v1/completions`: apply one scenario step to a legacy text completion request.

Owns: the text completions route's answer once its step is known: the
step's errors and socket faults (`openai_steps.before_success`, as on
chat), then the `text_completion` JSON under the body faults
(`openai_steps.send_json`) or its chunk stream under the mid-stream faults
(`sse_stream`: `cut<N>`, `stall<N>`, `badchunk<N>` and `i<N>` count the
chunks carrying answer text; `nodone` leaves out `data: [DONE]`;
`bodyerr` / `bodyerr429` send an error envelope with 200, as one event when
streaming). Admission (key, JSON, fields, scenario, log) is the app's,
shared with chat (`app.openai_route`).
Must not import: the chat answer builders beyond what `completions_wire` uses.
Source: https://platform.openai.com/docs/api-reference/completions/create.
"""

from __future__ import annotations

from aiohttp import web

from turnout_sim import completions_wire, openai_steps, sse_stream
from turnout_sim import openai_errors as errors
from turnout_sim import openai_wire as wire
from turnout_sim.attempt_log import Attempt, End
from turnout_sim.faults import Verdict
from turnout_sim.openai_steps import Env
from turnout_sim.scenarios import Step, StepKind

ID_PREFIX = "cmpl-sim"
"""Completion ids are `cmpl-sim<attempt number, 12 digits>`."""


async def answer(
    request: web.Request,
    req: completions_wire.CompletionsRequest,
    step: Step,
    *,
    verdict: Verdict,
    attempt: Attempt,
    env: Env,
) -> web.StreamResponse:
    """Answer a text completion request according to `step` (see the module doc).

    Args:
        request: the aiohttp request.
        req: the parsed request.
        step: the step this request consumed.
        verdict: the turn's verdict (`down`, `fail`, `cap`).
        attempt: the log entry to update.
        env: handler environment.

    Returns:
        The response to finish with `openai_steps.deliver` (a dead one after
        socket faults or a departed client).
    """
    asked = openai_steps.Asked(model=req.model, prompt_tokens=req.prompt_tokens)
    early = await openai_steps.before_success(request, step, asked, verdict=verdict, attempt=attempt, env=env)
    if early is not None:
        return early
    if step.answer_tokens is not None:  # len<N>: the model's answer has a length of its own
        req = completions_wire.with_answer_length(req, step.answer_tokens)
    completion_id = f"{ID_PREFIX}{attempt.seq:012d}"
    created_s = int(env.clock())
    error_body = errors.body_error(step.kind is StepKind.BODY_ERROR_429, req.model)
    try:
        if req.stream:
            return await _stream(request, req, step, attempt, env, completion_id, created_s)
        body = completions_wire.completion(req, completion_id=completion_id, created_s=created_s)
        malformed = b'{"id": "' + completion_id.encode() + b'", "object": "text_completion", "choices": ['
        return await openai_steps.send_json(
            request,
            openai_steps.json_bytes(body),
            step,
            attempt,
            env,
            error_body=openai_steps.json_bytes(error_body),
            malformed=malformed,
        )
    except ConnectionError:  # the client left mid-answer
        openai_steps.ended(attempt, env, End.CLIENT_GONE)
        return web.Response()


async def _stream(
    request: web.Request,
    req: completions_wire.CompletionsRequest,
    step: Step,
    attempt: Attempt,
    env: Env,
    completion_id: str,
    created_s: int,
) -> web.StreamResponse:
    resp = sse_stream.open_stream(openai_steps.base_headers(env), step)
    await resp.prepare(request)
    if step.kind in (StepKind.BODY_ERROR, StepKind.BODY_ERROR_429):
        await resp.write(wire.sse_event(errors.body_error(step.kind is StepKind.BODY_ERROR_429, req.model)))
        await resp.write_eof()
        return resp
    frames = [
        sse_stream.Frame(wire.sse_event(obj), content)
        for obj, content in completions_wire.stream_chunks(req, completion_id=completion_id, created_s=created_s)
    ]
    return await sse_stream.write(
        request, resp, frames, step, attempt, env, terminator=wire.SSE_DONE, malformed=wire.MALFORMED_EVENT
    )
