"""`POST /v1/embeddings`: apply one scenario step to an embeddings request.

Owns: the embeddings route's answer once its step is known: the step's
errors and socket faults (`openai_steps.before_success`, as on chat), then
the JSON answer of `embeddings_wire` under the body faults (`bodyerr` sends
an error envelope with 200, `badchunk` truncated JSON, `slow`, `cut`,
`stall`; `openai_steps.send_json`). Embeddings never stream, so `i<N>` and
`nodone` change nothing. Admission (key, JSON, fields, scenario, log) is the
app's, shared with chat.
Must not import: the chat wire modules.
"""

from __future__ import annotations

from aiohttp import web

from turnout_sim import embeddings_wire, openai_steps
from turnout_sim import openai_errors as errors
from turnout_sim.attempt_log import Attempt, End
from turnout_sim.faults import Verdict
from turnout_sim.openai_steps import Env
from turnout_sim.scenarios import Step, StepKind


async def answer(
    request: web.Request,
    req: embeddings_wire.EmbeddingsRequest,
    step: Step,
    *,
    verdict: Verdict,
    attempt: Attempt,
    env: Env,
) -> web.StreamResponse:
    """Answer an embeddings request according to `step`.

    Args:
        request: the aiohttp request.
        req: the parsed request.
        step: the step this request consumed.
        verdict: the turn's verdict (`down`, `fail`, `cap`).
        attempt: the log entry to update.
        env: handler environment.

    Returns:
        The response to finish with `openai_steps.deliver`.
    """
    asked = openai_steps.Asked(model=req.model, prompt_tokens=req.prompt_tokens)
    early = await openai_steps.before_success(request, step, asked, verdict=verdict, attempt=attempt, env=env)
    if early is not None:
        return early
    error_body = errors.body_error(step.kind is StepKind.BODY_ERROR_429, req.model)
    try:
        return await openai_steps.send_json(
            request,
            openai_steps.json_bytes(embeddings_wire.answer(req)),
            step,
            attempt,
            env,
            error_body=openai_steps.json_bytes(error_body),
        )
    except ConnectionError:  # the client left mid-answer
        openai_steps.ended(attempt, env, End.CLIENT_GONE)
        return web.Response()
