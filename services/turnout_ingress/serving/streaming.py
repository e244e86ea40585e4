"""The streaming direct path: `stream: true` runs the executor in the ingress.

Owns: the streaming chat route's body. The same router (policy, plan,
breaker, records) runs in-process with the streaming upstream
(`turnout.adapters.exchange.open_stream`), which commits at the first
content; the response head — with the `x-turnout-*` headers,
since by then it is known who serves — is sent only then, and the relay
forwards the rest. A client that leaves before the commit cancels the loop
and its in-flight upstream call; one that leaves after it closes the
upstream stream (the relay's cleanup).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from turnout.adapters.base import Usage
from turnout.adapters.exchange import open_stream
from turnout.answer import answer_of, served_headers
from turnout.catalog import Catalog
from turnout.core.deadline import Deadline
from turnout.core.model_types import Operation
from turnout.core.native import CHAT, Native
from turnout.core.plan import Plan
from turnout.core.policy import Policy
from turnout.core.types import FailureKind
from turnout.health import HealthView
from turnout.observability.telemetry import request_span
from turnout.router import Finish, RequestInfo, RouteResult
from turnout.streaming.continuation import Continuation
from turnout.streaming.relay import relay
from turnout.tenancy.identity import Identity
from turnout_ingress.errors import JSON
from turnout_ingress.serving.disconnect import unless_client_leaves

if TYPE_CHECKING:
    from turnout_ingress.state import IngressState


class EventStreamResponse(StreamingResponse):
    """A `StreamingResponse` that watches for the client leaving with one task, not a task group.

    Same behaviour as Starlette's: for an ASGI server below spec 2.4 (uvicorn
    speaks 2.3) the body is sent while `http.disconnect` is awaited, and a
    client that leaves cancels the sending (the relay then records the
    attempt as cancelled; its shielded cleanup runs to its end) and the
    response returns; an exception of the body propagates. Starlette runs
    both in an anyio task group (a task of its own for the body: 55 µs of
    CPU a stream measured on this project's machine); here the body is sent
    in the request's task, inside an anyio cancel scope that the disconnect
    listener's task cancels (14 µs). Spec 2.4 servers and websockets use
    Starlette's own path.

    Attributes:
        shape: the surface its events are in: `chat` (OpenAI chunks), or a
            native stream's (`messages`: the provider's own events, relayed as sent).
    """

    shape: str = CHAT

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the response (ASGI); see the class doc."""
        spec = tuple(map(int, scope.get("asgi", {}).get("spec_version", "2.0").split(".")))
        if scope["type"] != "http" or spec >= (2, 4):
            await super().__call__(scope, receive, send)
            return
        with anyio.CancelScope() as sending:

            def client_left(listener: asyncio.Future[None]) -> None:
                if not listener.cancelled():
                    sending.cancel()  # left, or the listening failed: either way nobody reads the body

            listener = asyncio.ensure_future(self.listen_for_disconnect(receive))
            listener.add_done_callback(client_left)
            try:
                await self.stream_response(send)
            finally:
                listener.remove_done_callback(client_left)
                listener.cancel()
        failed = listener.exception() if listener.done() and not listener.cancelled() else None
        if failed is not None:
            raise failed  # receiving failed: raised, as from Starlette's task group
        if self.background is not None:
            await self.background()


async def serve_stream(
    state: IngressState,
    request: Request,
    body: dict[str, Any],
    identity: Identity,
    request_id: str,
    *,
    deadline: Deadline,
    plan: Plan | None = None,
    view: HealthView | None = None,
    catalog: Catalog | None = None,
    operation: Operation = "chat",
    native: Native | None = None,
    used: Callable[[int | None], None] | None = None,
) -> Response:
    """Answer a `stream: true` request (SPEC §8) within `deadline` (the request's, from its arrival):
    `body` is the OpenAI request of `operation` (a chat completion, or a legacy completion).
    Continuation after a mid-stream failure (`retry.stream_recovery: continue`) serves chat
    only: it continues an assistant message.

    Errors before the commit point are ordinary JSON error answers (the
    client has received nothing yet); after it, the relay reports them as a
    final SSE error event. `native`: the client's own request, from another
    surface (`Router.route`); a target of its family streams its own events,
    and the response's `shape` says so. `used`: told the tokens the committed stream
    used (what it streamed: the usage its end reports) once it ends, to settle `tpm`.
    """
    upstream_request, include_usage = _upstream_request(body)
    policy = identity.policy
    catalog = catalog or state.catalog  # the plan's catalog serves every attempt (turnout.catalog.live)
    if plan is None or view is None:
        plan, view = await state.router.plan(body["model"], identity.settings, policy, identity.org, catalog=catalog)
    info = _request_info(identity, request_id, body, operation)

    async def route_in_span() -> RouteResult:
        # the request span covers the loop up to the commit point; the committed
        # attempt's own span ends with the stream (its `finish`)
        with request_span(state.obs.telemetry.tracing, info):
            return await state.router.route(
                upstream_request,
                plan=plan,
                view=view,
                policy=policy,
                time_left_s=deadline.left_s(state.clock()),
                info=info,
                upstream=open_stream,
                catalog=catalog,
                native=native,
            )

    routing = await unless_client_leaves(request, route_in_span())
    if routing is None:
        return Response(status_code=499)
    result = routing.result()
    if result.stream is None or result.finish is None:
        status, headers, payload = answer_of(result, request_id)
        return Response(payload, status_code=status, headers=headers, media_type=JSON)
    continuation = None
    if policy.retry.stream_recovery == "continue" and operation == "chat":
        continuation = _continuation(state, upstream_request, plan, view, info, policy, catalog, result)
    finish = result.finish if used is None else _telling(result.finish, used)
    return _event_stream(state, result, finish, request_id, include_usage, policy, continuation)


def _upstream_request(body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The request sent upstream (`stream: true`, asking for the usage at the end, which settles
    `tpm`), and whether the client itself asked for the usage (`stream_options.include_usage`)."""
    raw_options = body.get("stream_options")
    options: dict[str, Any] = raw_options if isinstance(raw_options, dict) else {}
    include_usage = bool(options.get("include_usage"))
    return {**body, "stream": True, "stream_options": {**options, "include_usage": True}}, include_usage


def _request_info(identity: Identity, request_id: str, body: dict[str, Any], operation: Operation) -> RequestInfo:
    """What the router records of a streaming request of `operation` by `identity`."""
    return RequestInfo(
        request_id=request_id,
        org=identity.org,
        squad=identity.squad,
        key=identity.key,
        requested_model=str(body["model"]),
        streaming=True,
        strategy=identity.settings.strategy_rule,
        operation=operation,
    )


def _continuation(
    state: IngressState,
    upstream_request: dict[str, Any],
    plan: Plan,
    view: HealthView,
    info: RequestInfo,
    policy: Policy,
    catalog: Catalog,
    result: RouteResult,
) -> Continuation:
    """How the committed stream `result` continues on another target after a mid-stream failure
    (`retry.stream_recovery: continue`): the same plan, the attempts numbered after `result`'s."""
    prefill = catalog.supports_prefill
    return Continuation(
        router=state.router,
        request=upstream_request,
        plan=plan,
        view=view,
        info=info,
        policy=policy,
        upstream=open_stream,
        supports_prefill=lambda t: prefill.get(t.key, True),
        first_number=len(result.records) + 1,
    )


def _event_stream(
    state: IngressState,
    result: RouteResult,
    finish: Finish,
    request_id: str,
    include_usage: bool,
    policy: Policy,
    continuation: Continuation | None,
) -> EventStreamResponse:
    """The SSE response relaying the committed stream of `result`, with the served headers."""
    headers = {**served_headers(result.served, request_id), "cache-control": "no-cache", "x-accel-buffering": "no"}
    response = EventStreamResponse(
        relay(
            result.stream,
            finish=finish,
            include_usage=include_usage,
            stall_timeout_s=policy.retry.stall_timeout_s,
            request_id=request_id,
            continuation=continuation,
            target=result.records[-1].target,
            scrub=state.router.scrubber.text,
        ),
        headers=headers,
        media_type="text/event-stream",
    )
    response.shape = result.shape
    return response


def _telling(finish: Finish, used: Callable[[int | None], None]) -> Finish:
    """`finish`, which also tells `used` the tokens of the stream's usage once it has ended."""

    async def finished(kind: FailureKind, usage: Usage, error: str) -> None:
        try:
            await finish(kind, usage, error)
        finally:
            tokens = usage.input_tokens + usage.output_tokens
            used(tokens or None)  # none reported (a stream cut early): the estimate stands

    return finished
