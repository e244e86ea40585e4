"""Apply one scenario step to an OpenAI chat completion request over HTTP.

Owns: answering `POST /v1/chat/completions` once its step is known — the
JSON and SSE successes (text continuing an assistant prefill, tool calls,
logprobs; built by `chat_answer`) under the step's faults. The faults
themselves are shared with the other OpenAI routes: before the body in
`openai_steps`, mid-stream in `sse_stream`.
Must not import: scenario parsing details beyond `Step`/`StepKind`; socket
tricks live in `connection`, bytes in `openai_wire` / `chat_answer`.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from turnout_sim import chat_answer, openai_steps, sse_stream
from turnout_sim import openai_errors as errors
from turnout_sim import openai_wire as wire
from turnout_sim.attempt_log import Attempt, End
from turnout_sim.faults import Verdict
from turnout_sim.openai_steps import Env, deliver, json_response
from turnout_sim.scenarios import Step, StepKind

__all__ = ["Env", "answer", "deliver", "json_response"]


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
    success (see `openai_steps.before_success`), updating `attempt.status`
    once it is decided. Records the attempt's end for faults and departed
    clients; otherwise the caller completes the response with `deliver`.

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
    asked = openai_steps.Asked(model=req.model, prompt_tokens=req.prompt_tokens, prefill=req.prefill is not None)
    early = await openai_steps.before_success(request, step, asked, verdict=verdict, attempt=attempt, env=env)
    if early is not None:
        return early
    if step.answer_tokens is not None:  # len<N>: the model's answer has a length of its own
        req = wire.with_answer_length(req, step.answer_tokens)
    completion_id = f"chatcmpl-sim{attempt.seq:012d}"
    created_s = int(env.clock())
    error_body = errors.body_error(step.kind is StepKind.BODY_ERROR_429, req.model)
    try:
        if req.stream:
            return await _stream(request, req, step, attempt, env, completion_id, created_s)
        completion = chat_answer.completion(req, completion_id=completion_id, created_s=created_s)
        body = wire.json_bytes(_filtered(completion, whole=True) if step.kind is StepKind.FILTERED else completion)
        malformed = b'{"id": "' + completion_id.encode() + b'", "object": "chat.completion", "choices": ['
        return await openai_steps.send_json(
            request, body, step, attempt, env, error_body=wire.json_bytes(error_body), malformed=malformed
        )
    except ConnectionError:  # the client left mid-answer (write to a closed transport)
        openai_steps.ended(attempt, env, End.CLIENT_GONE)
        return web.Response()


def _filtered(obj: dict[str, Any], *, whole: bool) -> dict[str, Any]:
    """`obj` (a completion, `whole`, or a chunk) as Azure's content filter ends it (`cf200`): each
    choice's `finish_reason` that is set becomes `content_filter`; a whole completion's messages
    lose their content (null) and tool calls, as a filtered answer carries none."""
    choices = []
    for choice in obj.get("choices", []):
        if choice.get("finish_reason") is not None:
            choice = {**choice, "finish_reason": "content_filter"}
            if whole:
                choice["message"] = {"role": "assistant", "content": None, "refusal": None}
        choices.append(choice)
    return {**obj, "choices": choices}


async def _stream(
    request: web.Request,
    req: wire.ChatRequest,
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
    filtered = step.kind is StepKind.FILTERED
    frames = [
        sse_stream.Frame(wire.sse_event(_filtered(obj, whole=False) if filtered else obj), content)
        for obj, content in chat_answer.stream_chunks(req, completion_id=completion_id, created_s=created_s)
    ]
    return await sse_stream.write(
        request, resp, frames, step, attempt, env, terminator=wire.SSE_DONE, malformed=wire.MALFORMED_EVENT
    )
