"""The front door: the one admission pipeline every client surface is served through.

Owns: the `POST` route of each surface of `turnout_ingress.surfaces.registry.SURFACES` and the
pipeline behind it, written once: authenticate (401) → read the body (413) → the
surface parses it into the canonical request (400) → budgets (429) → a stateful surface's
`prepare` hook (its own I/O, e.g. a stored conversation: 404, 503) → the pre-flight plan
(`preflight.check_plan`: 404, 400, 503) → `Idempotency-Key` checked (400) → limits and
the worst case reserved against a hard budget, one Lua call (429; for an unkeyed queued request
the enqueue's own script, `Limiter.gate`, and its worker frees and settles it) → a stream on the direct path (`streaming.serve_stream`), anything else a job on
the queue (SPEC §1: no upstream call on the ingress for it), answered by the worker →
the answer rendered by the surface in its own shape (its usage settles `tpm`), then a stateful surface's `settle`
hook (a stream settles in its own renderer, before its last frame). A refusal at any step raises
`RequestRejected` or `GatewayUnavailable`, answered by the app's handlers
(`turnout_ingress.errors`) in the shape of the route it came to.

`Idempotency-Key` (`turnout_ingress.serving.idempotency`): a retry with the same key and body
joins or replays the first request's answer (`x-turnout-idempotent-replay: 1`); a keyed
queued job outlives its client, so its stored answer is the retry's replay; a stream is
never replayed. A client that leaves an unkeyed queued request cancels its job (499).
Must not import: `turnout_ingress.app` (the app factory calls `install`).
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, NamedTuple

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from turnout.answer import error_body
from turnout.catalog import Catalog
from turnout.core.deadline import Deadline
from turnout.core.native import CHAT
from turnout.core.plan import Plan
from turnout.core.reserve import answer_tokens
from turnout.errors import RequestRejected
from turnout.health import HealthView
from turnout.tenancy.identity import Identity
from turnout.wire import JobPayload
from turnout_ingress.limits.admission import NOT_LIMITED, Held, LateHeld, Pending, worker_settles
from turnout_ingress.limits.budgets import budgeted
from turnout_ingress.limits.reservations import reservations
from turnout_ingress.serving import idempotency
from turnout_ingress.serving.disconnect import Outlived, unless_client_leaves
from turnout_ingress.serving.preflight import check_plan
from turnout_ingress.serving.streaming import EventStreamResponse, serve_stream
from turnout_ingress.serving.validation import authenticate, read_body
from turnout_ingress.surfaces.registry import SURFACES, Inbound, Surface

if TYPE_CHECKING:
    from turnout_ingress.state import IngressState

_BUDGET_RAN_OUT = "The request's time budget ran out before a worker answered."
_BODY_HEADERS = frozenset({"content-length", "content-type"})


class Admitted(NamedTuple):
    """A request past every check of the door, with what serving it needs."""

    request_id: str
    identity: Identity
    raw: bytes
    inbound: Inbound
    deadline: Deadline
    key: str | None
    plan: Plan
    view: HealthView
    catalog: Catalog
    used: Callable[[int | None], None] | None  # settles `tpm` to the answer's tokens; None: no `tpm`


def install(app: FastAPI, state: IngressState) -> None:
    """Register the `POST` route of every surface of `SURFACES` on `app`, in their order."""
    for surface in SURFACES:
        app.add_api_route(surface.path, _endpoint(state, surface), methods=["POST"], name=surface.name)


def _endpoint(state: IngressState, surface: Surface) -> Callable[[Request], Awaitable[Response]]:
    """The route's endpoint: it takes only the request (the hot path calls it directly)."""

    async def endpoint(request: Request) -> Response:
        return await serve(state, surface, request)

    endpoint.__name__ = f"{surface.name}_endpoint"
    return endpoint


async def serve(state: IngressState, surface: Surface, request: Request) -> Response:
    """Answer one request to `surface` (module doc).

    Raises:
        RequestRejected: 400, 401, 404, 409, 413, 429 (answered by the app's handlers).
        GatewayUnavailable: 503 (every target out of rotation; Redis unreachable).
    """
    arrived_s = state.clock()
    request_id = uuid.uuid4().hex
    request.state.request_id = request_id
    identity = authenticate(request, state.keyring)
    raw = await read_body(request, state.config.raw.gateway.max_body_bytes)
    inbound = surface.parse(raw, request.headers)
    identity = await budgeted(state, identity)
    if surface.stateful:  # one flag read for the others (`surfaces.base.Stateless`)
        inbound = await surface.prepare(state, inbound, identity, request_id)
    deadline = Deadline.of(arrived_s, identity.policy.budget)  # once, from arrival (SPEC §4 budget)
    catalog = state.catalog  # this request's catalog to its end: a swap meanwhile never mixes two
    plan, view = await check_plan(state, inbound.model, identity, inbound.preferences, catalog, inbound.operation)
    key = idempotency.key_of(request.headers)  # before admission: a refused key costs nothing
    try:
        pending = state.limiter.prepare(
            identity,
            inbound.body,
            len(raw),
            request_id,
            stream=inbound.stream,
            reservations=reservations(
                identity,
                plan,
                catalog,
                inbound.body,
                len(raw),
                default_completion_tokens=state.config.raw.gateway.default_completion_tokens,
            ),
        )
    except RequestRejected as exc:  # a ceiling names the canonical field: name the client's
        client = surface.client_fields.get(exc.param or "")
        if client is None:
            raise
        raise RequestRejected(
            exc.status_code,
            exc.message.replace(f"`{exc.param}`", f"`{client}`"),
            error_type=exc.error_type,
            code=exc.code,
            param=client,
            headers=exc.headers,
        ) from None
    if pending is not None and not inbound.stream and key is None:
        # admitted in the enqueue's own script (`Limiter.gate`): one round trip for both
        late = LateHeld()
        admitted = Admitted(request_id, identity, raw, inbound, deadline, key, plan, view, catalog, None)
        return await state.limiter.answer(late, _queued(state, surface, request, admitted, pending, late))
    # a stream, or a keyed request (admitted before its key is bound: a refused one leaves it free)
    held = NOT_LIMITED if pending is None else await state.limiter.decide(pending)
    used = functools.partial(state.limiter.used, held) if held.scopes else None
    admitted = Admitted(request_id, identity, raw, inbound, deadline, key, plan, view, catalog, used)
    if inbound.stream:  # a stream is never replayed (turnout_ingress.serving.idempotency)
        serving = idempotency.stream_once(
            state, key, raw, identity, request_id, deadline, lambda: _streamed(state, surface, request, admitted)
        )
        # served here: its reservations leave with its cost in this ingress's next ledger write
        return await state.limiter.answer(held, serving, functools.partial(state.obs.spend.settle, identity.org))
    late = LateHeld()
    late.held = held
    return await state.limiter.answer(held, _queued(state, surface, request, admitted, None, late))


async def _streamed(state: IngressState, surface: Surface, request: Request, admitted: Admitted) -> Response:
    """The direct path on the pre-flight plan (so the request's preferences hold), its frames
    and any answer before the commit point rendered by the surface."""
    response = await serve_stream(
        state,
        request,
        admitted.inbound.body,
        admitted.identity,
        admitted.request_id,
        deadline=admitted.deadline,
        plan=admitted.plan,
        view=admitted.view,
        catalog=admitted.catalog,
        operation=admitted.inbound.operation,
        native=admitted.inbound.native,
        used=admitted.used,
    )
    if isinstance(response, EventStreamResponse) and response.shape != CHAT:
        # a native stream: the provider's events, already in the surface's shape
        response.body_iterator = surface.render_native(response.body_iterator, admitted.inbound)
        return response
    if isinstance(response, StreamingResponse):
        response.body_iterator = surface.render_stream(response.body_iterator, admitted.inbound)
        return _headed(response, admitted.inbound)
    if response.status_code == 499:  # the client left: nobody reads it
        return response
    headers = {k: v for k, v in response.headers.items() if k not in _BODY_HEADERS}
    answer = _headed(
        surface.render(response.status_code, bytes(response.body), headers, admitted.request_id, admitted.inbound),
        admitted.inbound,
    )
    if surface.stateful:  # never raises (`Surface.settle`)
        await surface.settle(state, admitted.inbound)
    return answer


async def _queued(
    state: IngressState,
    surface: Surface,
    request: Request,
    admitted: Admitted,
    pending: Pending | None,
    late: LateHeld,
) -> Response:
    """Non-streaming: the job on the queue (with the health read it was planned with, and the
    budget reservations its worker settles with its cost), its result as the answer (or
    a replay of the request holding its `Idempotency-Key`). With `pending`, the request is
    admitted in the enqueue's own script (`Limiter.gate`, its `Held` put in `late`); else
    `late` holds what it was admitted with."""
    request_id, identity, deadline, key = admitted.request_id, admitted.identity, admitted.deadline, admitted.key
    owner = await idempotency.claim(state, key, admitted.raw, identity, request_id, deadline)
    if owner is not None:
        _nothing_spent(state, identity.org, late.held)
        try:
            replayed = await state.queue.join(owner, deadline.at_s)
        except TimeoutError:
            return _budget_exhausted(surface, admitted)
        headers = {**replayed.headers, "x-turnout-idempotent-replay": "1"}
        answer = surface.render(
            replayed.status_code, replayed.body, headers, request_id, admitted.inbound, replayed.shape
        )
        if surface.stateful:  # never raises (`Surface.settle`)
            await surface.settle(state, admitted.inbound)
        return answer
    payload = JobPayload(
        request_id=request_id,
        body=admitted.inbound.job_body,
        org=identity.org,
        squad=identity.squad,
        key=identity.key,
        policy=identity.policy,
        settings=identity.settings,
        preferences=admitted.inbound.preferences,
        deadline_epoch_s=deadline.at_s,
        reply_to=state.queue.reply_channel,
        health=admitted.view.loaded(),
        catalog_version=state.catalogs.version,
        operation=admitted.inbound.operation,
        native=admitted.inbound.native,
        keyed=key is not None,
        holds=late.held.lease.holds if pending is None else pending.call.lease.holds,
        **({} if pending is None else worker_settles(pending)),
    )
    # a keyed job outlives its client: its stored result answers the retry the key announces
    gate = None if pending is None else state.limiter.gate(pending, late)
    work = asyncio.ensure_future(state.queue.submit(payload, gate))
    submit = await unless_client_leaves(request, work, outlive_client=key is not None)
    if submit is None:
        if key is not None:
            return Outlived(work)  # its concurrency slots stay held until the job ends
        await state.queue.cancel(request_id)
        return Response(status_code=499)
    try:
        result = submit.result()
    except TimeoutError:
        return _budget_exhausted(surface, admitted)
    if pending is not None:  # its worker freed its slots and settles the rest (`Limiter.delivered`)
        late.held = state.limiter.delivered(late.held)
    if result.status_code == 200 and late.held.scopes:
        state.limiter.used(late.held, answer_tokens(result.body))
    answer = _headed(
        surface.render(result.status_code, result.body, result.headers, request_id, admitted.inbound, result.shape),
        admitted.inbound,
        result.shape,
    )
    if surface.stateful:  # never raises (`Surface.settle`)
        await surface.settle(state, admitted.inbound)
    return answer


def _nothing_spent(state: IngressState, org: str, held: Held) -> None:
    """A replay (its key's request answers it) makes no upstream call: its budget reservations
    leave in this ingress's next ledger write with no cost, and its `tpm` estimate is given back
    (charged to 0 tokens); its `rpm` and concurrency slot count as any request's."""
    state.obs.spend.settle(org, held.lease.holds)
    if held.scopes:
        state.limiter.used(held, 0)


def _headed(response: Response, inbound: Inbound, shape: str = CHAT) -> Response:
    """`response` with the surface's `Inbound.answer_headers` (none on most requests); none on a
    native answer (`shape` not `chat`: the client's request went upstream as sent, nothing left out)."""
    if shape != CHAT:
        return response
    for name, value in inbound.answer_headers:
        response.headers[name] = value
    return response


def _budget_exhausted(surface: Surface, admitted: Admitted) -> Response:
    """The 504 `budget_exhausted` (`x-should-retry: false`) in the surface's shape."""
    body = error_body(_BUDGET_RAN_OUT, error_type="timeout_error", code="budget_exhausted")
    rid = admitted.request_id
    return surface.render(504, body, {"x-request-id": rid, "x-should-retry": "false"}, rid, admitted.inbound)
