"""The rest of the Anthropic surface: count_tokens, the models list, errors on any `/v1/messages` path.

Owns:
- `POST /v1/messages/count_tokens` (counting: `tokens`), admitted against the
  key's `rpm` on counters of its own (`Limiter.admit_count`; 429 over it);
- `anthropic_models`: `GET /v1/models` in Anthropic's shape, for callers that
  send `anthropic-version` (the Anthropic SDKs always do);
- Anthropic-format errors for every other path and method under
  `/v1/messages` (404 `not_found_error`, 405), so an Anthropic SDK never
  meets an OpenAI-format body there;
- Anthropic-format refusals of its routes (`rejected`; the 401's text, naming
  `x-api-key`, is `wire.ANTHROPIC_UNAUTHORIZED`).
Must not import: `turnout_ingress.app`.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import msgspec
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response

from turnout.adapters.chat_parts import WireError
from turnout.core.model_types import mismatch_message
from turnout.core.plan import MAX_MODEL_ID_CHARS, UnknownModel
from turnout.errors import GatewayUnavailable, RequestRejected
from turnout.tenancy.identity import Identity
from turnout_ingress.errors import JSON, door_refused, error_response
from turnout_ingress.guard.methods import REFUSAL
from turnout_ingress.serving.validation import authenticate, read_body
from turnout_ingress.surfaces.messages.tokens import count_input_tokens
from turnout_ingress.surfaces.messages.wire import (
    ANTHROPIC_UNAUTHORIZED,
    check_messages_request,
    decode_messages_body,
    error_body,
    to_openai_request,
)

if TYPE_CHECKING:
    from turnout_ingress.state import IngressState

OTHER_METHODS = ["GET", "PUT", "PATCH", "DELETE"]
_encode = msgspec.json.Encoder()


def anthropic_error(status: int, message: str, request_id: str, headers: dict[str, str] | None = None) -> Response:
    """An Anthropic-format error answer (`{"type": "error", "error": {...}}`) with `x-request-id`."""
    return Response(
        error_body(status, message, request_id),
        status_code=status,
        media_type=JSON,
        headers={"x-request-id": request_id, **(headers or {})},
    )


def rejected(exc: RequestRejected, request_id: str) -> Response:
    """`exc` in Anthropic's format (with its headers: `Retry-After`, `x-ratelimit-*`); the 401 names `x-api-key`."""
    message = ANTHROPIC_UNAUTHORIZED if exc.status_code == 401 else exc.message
    return anthropic_error(exc.status_code, message, request_id, dict(exc.headers or {}))


def anthropic_models(state: IngressState) -> Response:
    """The catalog as Anthropic's `GET /v1/models` page (one page: `has_more` false)."""
    ids = sorted(state.catalog.models)
    data = [{"type": "model", "id": m, "display_name": m, "created_at": "1970-01-01T00:00:00Z"} for m in ids]
    page = {"data": data, "has_more": False, "first_id": ids[0] if ids else None, "last_id": ids[-1] if ids else None}
    return Response(_encode.encode(page), media_type=JSON)


def model_object(state: IngressState, model_id: str, *, anthropic: bool) -> Response:
    """`GET /v1/models/{model_id}`: the catalog model as OpenAI's model object (Anthropic's with
    `anthropic`), or 404 `model_not_found` in that caller's error shape (the id cut to
    `MAX_MODEL_ID_CHARS`)."""
    if model_id in state.catalog.models:
        found: dict[str, object]
        if anthropic:
            found = {"type": "model", "id": model_id, "display_name": model_id, "created_at": "1970-01-01T00:00:00Z"}
        else:
            found = {"id": model_id, "object": "model", "created": 0, "owned_by": "turnout"}
        return Response(_encode.encode(found), media_type=JSON)
    shown = model_id if len(model_id) <= MAX_MODEL_ID_CHARS else f"{model_id[:MAX_MODEL_ID_CHARS]}…"
    message = str(UnknownModel(shown))
    rid = uuid.uuid4().hex
    if anthropic:
        body = error_body(404, message, rid)
        return Response(body, status_code=404, media_type=JSON, headers={"x-request-id": rid})
    return error_response(
        404,
        message,
        error_type="invalid_request_error",
        code="model_not_found",
        param="model",
        headers={"x-request-id": rid},
    )


def new_request_id(request: Request) -> str:
    """A fresh request id, also kept on `request.state` (logs, spans)."""
    request_id = uuid.uuid4().hex
    request.state.request_id = request_id
    return request_id


async def caller_and_body(request: Request, state: IngressState) -> tuple[Identity, bytes]:
    """The authenticated caller and the body (at most `gateway.max_body_bytes`).

    Raises:
        RequestRejected: 401 (answer it with `rejected`), 413.
    """
    identity = authenticate(request, state.keyring)
    return identity, await read_body(request, state.config.raw.gateway.max_body_bytes)


def install(app: FastAPI, state: IngressState) -> None:
    """Register count_tokens and the Anthropic-format catch-alls (after `POST /v1/messages`)."""

    @app.post("/v1/messages/count_tokens")
    async def count_tokens(request: Request) -> Response:
        request_id = new_request_id(request)
        try:
            identity, raw = await caller_and_body(request, state)
            try:  # count_tokens takes no max_tokens: any stands in for the Messages checks
                body = check_messages_request({"max_tokens": 1, **decode_messages_body(raw)})
                to_openai_request(body)  # its blocks checked as `POST /v1/messages` checks them
            except WireError as exc:
                raise RequestRejected(400, exc.message, param=exc.param) from exc
            try:
                plan, view = await state.router.plan(
                    str(body["model"]), identity.settings, identity.policy, identity.org
                )
            except UnknownModel as exc:
                raise RequestRejected(
                    404, f"The model `{body['model']}` does not exist.", code="model_not_found", param="model"
                ) from exc
            model_type = state.catalog.type_of(str(body["model"]))
            if model_type == "embedding":  # as `POST /v1/messages` answers it (`preflight.check_plan`)
                raise RequestRejected(
                    400,
                    mismatch_message(str(body["model"]), model_type, "chat"),
                    code="wrong_model_type",
                    param="model",
                )
            held = await state.limiter.admit_count(identity, request_id)  # 429 over an `rpm`
            tokens, provider = await count_input_tokens(state, plan, body, identity, view, request_id)
        except RequestRejected as exc:
            door_refused(request, exc.status_code, exc.code)
            return rejected(exc, request_id)
        except GatewayUnavailable as exc:
            door_refused(request, 503, exc.code)
            return anthropic_error(503, exc.message, request_id, {"retry-after": str(exc.retry_after_s)})
        headers = {
            **held.headers,
            "x-request-id": request_id,
            "x-turnout-count-source": "provider" if provider else "estimate",
        }
        if provider:
            headers["x-turnout-provider"] = provider
        return Response(_encode.encode({"input_tokens": tokens}), media_type=JSON, headers=headers)

    async def messages_other_method(request: Request) -> Response:
        rid = door_refused(request, 405, "method_not_allowed")
        return anthropic_error(
            405, f"Method {request.method} is not allowed on {request.url.path}; use POST.", rid, {"allow": "POST"}
        )

    for path in ("/v1/messages", "/v1/messages/count_tokens"):  # 405 only; before the 404 catch-all below
        app.add_api_route(path, messages_other_method, methods=OTHER_METHODS, include_in_schema=False, name=REFUSAL)

    @app.api_route("/v1/messages/{rest:path}", methods=["POST", *OTHER_METHODS], include_in_schema=False)  # 404 only
    async def messages_unknown(request: Request, rest: str) -> Response:
        rid = door_refused(request, 404, "unknown_route")
        return anthropic_error(
            404, f"Not found: {request.method} /v1/messages/{rest} is not served by this gateway.", rid
        )
