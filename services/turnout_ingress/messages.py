"""`POST /v1/messages`: the Anthropic Messages API for clients of the official
`anthropic` SDK (`base_url` pointed at Turnout, the gateway key as `x-api-key`).

Owns: the route. It checks the body (`messages_wire`), translates it into the
internal OpenAI chat request and serves it through the same machinery as
`/v1/chat/completions` — non-streaming through the queue (the same
`JobPayload`, the worker's OpenAI answer translated back into an Anthropic
`message`), streaming through the direct path (the relay's OpenAI frames
translated into Anthropic events by `messages_events`). The `x-turnout-*`
headers are the same; every error, the gateway's own included (502 →
`api_error`, 503 → `overloaded_error`, 504 → `timeout_error`, with the
per-attempt summary kept), is in Anthropic's error shape.
Must not import: `turnout_ingress.app` (the app factory passes what it needs).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

import msgspec
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from turnout.adapters.anthropic_wire import WireError
from turnout.errors import GatewayUnavailable, RequestRejected
from turnout.tenancy import Identity
from turnout.wire import JobPayload
from turnout_ingress.budgets import budgeted
from turnout_ingress.disconnect import unless_client_leaves
from turnout_ingress.errors import JSON
from turnout_ingress.messages_events import anthropic_stream
from turnout_ingress.messages_wire import (
    error_body, from_openai_error, parse_messages_request, to_anthropic_message, to_openai_request,
)
from turnout_ingress.streaming import serve_stream
from turnout_ingress.validation import authenticate, read_body

if TYPE_CHECKING:
    from turnout_ingress.app import IngressState

CheckPlan = Callable[["IngressState", str, Identity], Awaitable[object]]
"""The app's pre-flight check: unknown model (404), every breaker OPEN (503)."""

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()
_DROPPED_HEADERS = frozenset({"content-length", "content-type"})


def _error(status: int, message: str, request_id: str, headers: Mapping[str, str] | None = None) -> Response:
    return Response(
        error_body(status, message, request_id), status_code=status, media_type=JSON,
        headers={"x-request-id": request_id, **(headers or {})},
    )


def _translated(status: int, body: bytes, headers: Mapping[str, str], request_id: str) -> Response:
    """The Anthropic answer for the fleet's OpenAI-format (status, body, headers)."""
    kept = {k: v for k, v in headers.items() if k.lower() not in _DROPPED_HEADERS}
    if status == 200:
        try:
            completion = _decode.decode(body)
        except msgspec.DecodeError:
            return _error(502, "The provider's answer could not be read.", request_id, kept)
        return Response(_encode.encode(to_anthropic_message(completion)), status_code=200, headers=kept,
                        media_type=JSON)
    return Response(from_openai_error(status, body, request_id), status_code=status, headers=kept, media_type=JSON)


async def _queued(
    state: "IngressState", request: Request, body: bytes, identity: Identity, request_id: str
) -> Response:
    """Non-streaming: the same job as `/v1/chat/completions`, answered in Anthropic's format."""
    payload = JobPayload(
        request_id=request_id, body=body, org=identity.org, squad=identity.squad, key=identity.key,
        policy=identity.policy, settings=identity.settings,
        deadline_epoch_s=time.time() + identity.policy.budget.max_total_latency_ms / 1000,
        reply_to=state.queue.reply_channel,
    )
    submit = await unless_client_leaves(request, state.queue.submit(payload))
    if submit is None:
        await state.queue.cancel(request_id)
        return Response(status_code=499)
    try:
        result = submit.result()
    except TimeoutError:
        return _error(504, "The request's time budget ran out before a worker answered.", request_id,
                      {"x-should-retry": "false"})
    return _translated(result.status_code, result.body, result.headers, request_id)


async def _streamed(
    state: "IngressState", request: Request, body: dict[str, object], identity: Identity, request_id: str
) -> Response:
    """Streaming: the direct path, its OpenAI frames translated into Anthropic events."""
    response = await serve_stream(state, request, body, identity, request_id)
    if isinstance(response, StreamingResponse):
        response.body_iterator = anthropic_stream(response.body_iterator, model=str(body["model"]))
        return response
    if response.status_code == 499:
        return response
    return _translated(response.status_code, bytes(response.body), response.headers, request_id)


def install(app: FastAPI, state: "IngressState", *, check_plan: CheckPlan) -> None:
    """Register `POST /v1/messages` on `app`.

    Args:
        app: the ingress app.
        state: the ingress's shared objects (queue, router, keyring).
        check_plan: the app's pre-flight check (unknown model, all OPEN).
    """

    @app.post("/v1/messages")
    async def messages(request: Request) -> Response:
        request_id = uuid.uuid4().hex
        request.state.request_id = request_id
        try:
            identity = authenticate(request, state.keyring)
            raw = await read_body(request, state.config.raw.gateway.max_body_bytes)
            try:
                body = to_openai_request(parse_messages_request(raw))
            except WireError as exc:
                raise RequestRejected(400, exc.message, param=exc.param) from exc
            identity = await budgeted(state, identity)
            await check_plan(state, str(body["model"]), identity)
            if body.get("stream"):
                body["stream_options"] = {"include_usage": True}
                return await _streamed(state, request, body, identity, request_id)
            return await _queued(state, request, _encode.encode(body), identity, request_id)
        except RequestRejected as exc:
            return _error(exc.status_code, exc.message, request_id)
        except GatewayUnavailable as exc:
            return _error(503, exc.message, request_id, {"retry-after": str(exc.retry_after_s)})
