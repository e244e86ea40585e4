"""`POST /v1/messages`: the Anthropic Messages API for clients of the official
`anthropic` SDK (`base_url` pointed at Turnout, the gateway key as `x-api-key`).

Owns: the route. It checks the body (`messages_wire`), translates it into the
internal OpenAI chat request and serves it through the same machinery as
`/v1/chat/completions` — non-streaming through the queue (the same
`JobPayload`, the worker's OpenAI answer translated back into an Anthropic
`message`), streaming through the direct path (the relay's OpenAI frames
translated into Anthropic events by `messages_events`). The client's own
request rides beside it (`messages_native.carried`: SPEC §13 "same family,
same bytes"): an Anthropic target is sent it as is, and its answer — the
provider's `message`, or its stream's events — comes back as is
(`messages_native.rendered`, and a native stream is not translated). The body's
`provider` object (per-request routing preferences, SPEC §10) is read as on
`/v1/chat/completions` (`take_preferences`): checked, planned with, carried
in the job, never sent upstream. The `x-turnout-*`
headers are the same; every error, the gateway's own included (502 →
`api_error`, 503 → `overloaded_error`, 504 → `timeout_error`, with the
per-attempt summary kept), is in Anthropic's error shape; the 401 names
`x-api-key`. `Idempotency-Key` works as on `/v1/chat/completions` (a retry
joins or replays the first answer; a stream is never replayed: a stream
with the key of one that started is a 409, see `turnout_ingress.idempotency`). The
rest of the surface (count_tokens, the Anthropic models list, errors on
other paths) is in `messages_routes`.
Must not import: `turnout_ingress.app` (the app factory passes what it needs).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

import msgspec
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from turnout.catalog import Catalog
from turnout.core.deadline import Deadline
from turnout.core.native import CHAT, MESSAGES, Native
from turnout.core.plan import Plan
from turnout.core.preferences import Preferences
from turnout.errors import GatewayUnavailable, RequestRejected
from turnout.health import HealthView
from turnout.tenancy.identity import Identity
from turnout.wire import JobPayload
from turnout_ingress import idempotency, messages_routes
from turnout_ingress.budgets import budgeted
from turnout_ingress.disconnect import Outlived, unless_client_leaves
from turnout_ingress.errors import JSON
from turnout_ingress.messages_events import anthropic_stream
from turnout_ingress.messages_native import carried, rendered
from turnout_ingress.messages_wire import error_body
from turnout_ingress.streaming import EventStreamResponse, serve_stream

if TYPE_CHECKING:
    from turnout_ingress.state import IngressState

CheckPlan = Callable[["IngressState", str, Identity, Preferences, Catalog], Awaitable[tuple[Plan, HealthView]]]
"""The app's pre-flight check, (state, model, identity, preferences, catalog) → (plan, health view):
unknown model (404), preferences that leave no offer (400), every breaker OPEN (503)."""

_encode = msgspec.json.Encoder()


def _error(status: int, message: str, request_id: str, headers: Mapping[str, str] | None = None) -> Response:
    return Response(
        error_body(status, message, request_id),
        status_code=status,
        media_type=JSON,
        headers={"x-request-id": request_id, **(headers or {})},
    )


_BUDGET_RAN_OUT = "The request's time budget ran out before a worker answered."


async def _queued(
    state: IngressState,
    request: Request,
    body: bytes,
    identity: Identity,
    request_id: str,
    owner: str | None,
    deadline: Deadline,
    preferences: Preferences,
    view: HealthView,
    *,
    keyed: bool,
    native: Native,
) -> Response:
    """Non-streaming: the same job as `/v1/chat/completions` (its `preferences`, the health
    `view` it was planned with, and the client's own request, `native`), answered in
    Anthropic's format (`rendered`, by the shape of the worker's answer).

    With `owner` (the request already holding this Idempotency-Key) nothing is
    submitted: its result is joined and replayed (`x-turnout-idempotent-replay: 1`).
    A `keyed` job (its request holds an Idempotency-Key) outlives its client,
    as on the chat route.
    """
    deadline_s = deadline.at_s
    if owner is not None:
        try:
            result = await state.queue.join(owner, deadline_s)
        except TimeoutError:
            return _error(504, _BUDGET_RAN_OUT, request_id, {"x-should-retry": "false"})
        return rendered(
            result.status_code,
            result.body,
            {**result.headers, "x-turnout-idempotent-replay": "1"},
            request_id,
            shape=result.shape,
        )
    payload = JobPayload(
        request_id=request_id,
        body=body,
        org=identity.org,
        squad=identity.squad,
        key=identity.key,
        policy=identity.policy,
        settings=identity.settings,
        preferences=preferences,
        deadline_epoch_s=deadline_s,
        reply_to=state.queue.reply_channel,
        health=view.loaded(),
        catalog_version=state.catalogs.version,
        native=native,
    )
    work = asyncio.ensure_future(state.queue.submit(payload))
    submit = await unless_client_leaves(request, work, outlive_client=keyed)
    if submit is None:
        if keyed:
            return Outlived(work)  # its concurrency slots stay held until the job ends
        await state.queue.cancel(request_id)
        return Response(status_code=499)
    try:
        result = submit.result()
    except TimeoutError:
        return _error(504, _BUDGET_RAN_OUT, request_id, {"x-should-retry": "false"})
    return rendered(result.status_code, result.body, result.headers, request_id, shape=result.shape)


async def _streamed(
    state: IngressState,
    request: Request,
    body: dict[str, object],
    identity: Identity,
    request_id: str,
    deadline: Deadline,
    planned: tuple[Plan, HealthView, Catalog],
    native: Native,
) -> Response:
    """Streaming: the direct path on the `planned` (plan, health view, catalog) of the
    pre-flight check, so the request's preferences hold; its OpenAI frames translated
    into Anthropic events, a native stream's events (an Anthropic target's) relayed as sent."""
    plan, view, catalog = planned
    response = await serve_stream(
        state,
        request,
        body,
        identity,
        request_id,
        deadline=deadline,
        plan=plan,
        view=view,
        catalog=catalog,
        native=native,
    )
    if isinstance(response, EventStreamResponse) and response.shape == MESSAGES:
        return response
    if isinstance(response, StreamingResponse):
        response.body_iterator = anthropic_stream(response.body_iterator, model=str(body["model"]))
        return response
    if response.status_code == 499:
        return response
    return rendered(response.status_code, bytes(response.body), response.headers, request_id, shape=CHAT)


def install(app: FastAPI, state: IngressState, *, check_plan: CheckPlan) -> None:
    """Register `POST /v1/messages` and the rest of the Anthropic surface (`messages_routes`) on `app`.

    Args:
        app: the ingress app.
        state: the ingress's shared objects (queue, router, keyring).
        check_plan: the app's pre-flight check (unknown model, no offer left by the
            request's preferences, all OPEN), whose plan the streaming path serves.
    """

    @app.post("/v1/messages")
    async def messages(request: Request) -> Response:
        arrived_s = state.clock()
        request_id = messages_routes.new_request_id(request)
        try:
            identity, raw = await messages_routes.caller_and_body(request, state)
            body, preferences, native = carried(raw, request.headers.items())
            identity = await budgeted(state, identity)
            deadline = Deadline.of(arrived_s, identity.policy.budget)  # once, from arrival (SPEC §4 budget)
            catalog = state.catalog  # this request's catalog to its end, as on the chat route
            plan, view = await check_plan(state, str(body["model"]), identity, preferences, catalog)
            key = idempotency.key_of(request.headers)  # before admission: a refused key costs nothing
            held = await state.limiter.admit(identity, body, len(raw), request_id, stream=bool(body.get("stream")))
            if body.get("stream"):
                body["stream_options"] = {"include_usage": True}
                return await state.limiter.answer(
                    held,
                    idempotency.stream_once(
                        state,
                        key,
                        raw,
                        identity,
                        request_id,
                        deadline,
                        lambda: _streamed(
                            state, request, body, identity, request_id, deadline, (plan, view, catalog), native
                        ),
                    ),
                )

            async def queued() -> Response:
                owner = await idempotency.claim(state, key, raw, identity, request_id, deadline)
                return await _queued(
                    state,
                    request,
                    _encode.encode(body),
                    identity,
                    request_id,
                    owner,
                    deadline,
                    preferences,
                    view,
                    keyed=key is not None,
                    native=native,
                )

            return await state.limiter.answer(held, queued())
        except RequestRejected as exc:
            return messages_routes.rejected(exc, request_id)
        except GatewayUnavailable as exc:
            return _error(503, exc.message, request_id, {"retry-after": str(exc.retry_after_s)})

    messages_routes.install(app, state)
