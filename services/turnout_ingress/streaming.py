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

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from turnout.adapters.exchange import open_stream
from turnout.answer import answer_of, served_headers
from turnout.catalog import Catalog
from turnout.core.deadline import Deadline
from turnout.core.plan import Plan
from turnout.health import HealthView
from turnout.observability.telemetry import request_span
from turnout.router import RequestInfo, RouteResult
from turnout.streaming.continuation import Continuation
from turnout.streaming.relay import relay
from turnout.tenancy.identity import Identity
from turnout_ingress.disconnect import unless_client_leaves
from turnout_ingress.errors import JSON

if TYPE_CHECKING:
    from turnout_ingress.state import IngressState


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
) -> Response:
    """Answer a `stream: true` chat completion (SPEC §8) within `deadline` (the request's, from its arrival).

    Errors before the commit point are ordinary JSON error answers (the
    client has received nothing yet); after it, the relay reports them as a
    final SSE error event.
    """
    raw_options = body.get("stream_options")
    options: dict[str, Any] = raw_options if isinstance(raw_options, dict) else {}
    include_usage = bool(options.get("include_usage"))
    upstream_request = {**body, "stream": True, "stream_options": {**options, "include_usage": True}}
    policy = identity.policy
    catalog = catalog or state.catalog  # the plan's catalog serves every attempt (turnout.catalog.live)
    if plan is None or view is None:
        plan, view = await state.router.plan(body["model"], identity.settings, policy, identity.org, catalog=catalog)
    info = RequestInfo(
        request_id=request_id,
        org=identity.org,
        squad=identity.squad,
        key=identity.key,
        requested_model=str(body["model"]),
        streaming=True,
        strategy=identity.settings.strategy_rule,
    )

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
            )

    routing = await unless_client_leaves(request, route_in_span())
    if routing is None:
        return Response(status_code=499)
    result = routing.result()
    if result.stream is None or result.finish is None:
        status, headers, payload = answer_of(result, request_id)
        return Response(payload, status_code=status, headers=headers, media_type=JSON)
    continuation = None
    if policy.retry.stream_recovery == "continue":
        prefill = catalog.supports_prefill
        continuation = Continuation(
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
    headers = {**served_headers(result.served, request_id), "cache-control": "no-cache", "x-accel-buffering": "no"}
    return StreamingResponse(
        relay(
            result.stream,
            finish=result.finish,
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
