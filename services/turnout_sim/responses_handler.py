"""`POST /v1/responses`: apply one scenario step to a Responses API request.

Owns: the Responses route's answer once its step is known, and the small
store of answered responses that `previous_response_id` looks up. The
faults are chat's (`openai_steps`, `sse_stream`): a step that fails before
the first byte (a status, Retry-After forms, `reset`, `close`, `hang`,
`down`, `fail<P>`, `cap<N>`, ...) is an HTTP error with an OpenAI error body;
after the stream is committed `cut<N>` / `stall<N>` / `badchunk<N>` / `i<N>`
/ `slow<ms>` count the `*.delta` events, `nodone` leaves out the final
`response.completed`, and `bodyerr` / `bodyerr429` send `response.failed`
(a non-streamed answer: a Response with `status: "failed"` and its
`error`, with 200). Each attempt's log entry keeps what it carried
(`received`: the body as text and the `openai-beta` header).
Must not import: the chat wire modules beyond what `responses_wire` uses.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from typing import Any

from aiohttp import web

from turnout_sim import openai_steps, responses_events, responses_wire, sse_stream
from turnout_sim.attempt_log import Attempt, End
from turnout_sim.faults import Verdict
from turnout_sim.openai_steps import Env
from turnout_sim.scenarios import Step, StepKind

STORE_SIZE = 1000
"""Most responses the store keeps; the oldest is forgotten first."""


class ResponseStore:
    """Answered responses by id, for `previous_response_id` (bounded, oldest out first)."""

    def __init__(self, size: int = STORE_SIZE) -> None:
        """Args: size: most responses kept (>= 1)."""
        self._size = size
        self._by_id: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def __contains__(self, response_id: object) -> bool:
        """Whether `response_id` (`resp_...`) is stored."""
        return response_id in self._by_id

    def __len__(self) -> int:
        """How many responses are stored."""
        return len(self._by_id)

    def keep(self, response: dict[str, Any]) -> None:
        """Store a Response object under its `id`, forgetting the oldest past the size."""
        self._by_id[response["id"]] = response
        while len(self._by_id) > self._size:
            self._by_id.popitem(last=False)


async def answer(
    request: web.Request,
    req: responses_wire.ResponsesRequest,
    step: Step,
    *,
    verdict: Verdict,
    attempt: Attempt,
    env: Env,
    store: ResponseStore,
) -> web.StreamResponse:
    """Answer a Responses request according to `step` (see the module doc).

    Args:
        request: the aiohttp request.
        req: the parsed request.
        step: the step this request consumed.
        verdict: the turn's verdict (`down`, `fail`, `cap`).
        attempt: the log entry to update.
        env: handler environment.
        store: where a finished response is kept when `req.store`.

    Returns:
        The response to finish with `openai_steps.deliver`.
    """
    attempt.received = {  # what the request carried, for `/sim/log` (no key)
        "body": (await request.read()).decode("utf-8", "replace"),
        "headers": {k.lower(): v for k, v in request.headers.items() if k.lower() == "openai-beta"},
    }
    asked = openai_steps.Asked(model=req.model, prompt_tokens=req.chat.prompt_tokens)
    early = await openai_steps.before_success(request, step, asked, verdict=verdict, attempt=attempt, env=env)
    if early is not None:
        return early
    if step.answer_tokens is not None:
        req = responses_wire.with_answer_length(req, step.answer_tokens)
    token, created_s = uuid.uuid4().hex, int(env.clock())
    error = responses_wire.failed_error(step.kind is StepKind.BODY_ERROR_429)
    failed = responses_wire.response(req, token=token, created_s=created_s, status="failed", output=[], error=error)
    try:
        if req.stream:
            return await _stream(request, req, step, attempt, env, token, created_s, store)
        output = responses_wire.output_items(req, token)
        status = responses_wire.final_status(req)
        body = responses_wire.response(req, token=token, created_s=created_s, status=status, output=output)
        if req.store and step.kind not in (StepKind.BODY_ERROR, StepKind.BODY_ERROR_429):
            store.keep(body)
        return await openai_steps.send_json(
            request, openai_steps.json_bytes(body), step, attempt, env, error_body=openai_steps.json_bytes(failed)
        )
    except ConnectionError:  # the client left mid-answer
        openai_steps.ended(attempt, env, End.CLIENT_GONE)
        return web.Response()


async def _stream(
    request: web.Request,
    req: responses_wire.ResponsesRequest,
    step: Step,
    attempt: Attempt,
    env: Env,
    token: str,
    created_s: int,
    store: ResponseStore,
) -> web.StreamResponse:
    resp = sse_stream.open_stream(openai_steps.base_headers(env), step)
    await resp.prepare(request)
    if step.kind in (StepKind.BODY_ERROR, StepKind.BODY_ERROR_429):
        error = responses_wire.failed_error(step.kind is StepKind.BODY_ERROR_429)
        for data in responses_events.failed_events(req, token=token, created_s=created_s, error=error):
            await resp.write(data)
        await resp.write_eof()
        return resp
    events = responses_events.stream_events(req, token=token, created_s=created_s)
    frames = [sse_stream.Frame(responses_events.frame(event), content) for event, content in events[:-1]]
    last = events[-1][0]  # response.completed / response.incomplete
    done = await sse_stream.write(
        request,
        resp,
        frames,
        step,
        attempt,
        env,
        terminator=responses_events.frame(last),
        malformed=responses_events.MALFORMED_EVENT,
    )
    if req.store and attempt.end is None and step.kind is not StepKind.NO_DONE:
        store.keep(last["response"])
    return done
