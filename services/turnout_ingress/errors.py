"""HTTP error mapping of the ingress: every error is an OpenAI-format body, or Anthropic's for a
request that gets that shape (`surfaces.messages.wire.answers_anthropic`: the `/v1/messages` paths, and
`/v1/models` with `anthropic-version`).

Owns: one handler table from exception class to (status, body, headers).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from turnout.answer import error_body
from turnout.errors import GatewayUnavailable, RequestRejected
from turnout_ingress.guard.methods import allowed
from turnout_ingress.surfaces.messages.wire import ANTHROPIC_UNAUTHORIZED, answers_anthropic
from turnout_ingress.surfaces.messages.wire import error_body as anthropic_error_body

JSON = "application/json"


def error_response(
    status: int,
    message: str,
    *,
    error_type: str,
    code: str | None = None,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """An OpenAI-format error response."""
    return Response(
        error_body(message, error_type=error_type, code=code, param=param),
        status_code=status,
        media_type=JSON,
        headers=dict(headers or {}),
    )


def _anthropic(status: int, message: str, headers: Mapping[str, str]) -> Response:
    """An Anthropic-format error answer with `headers`; its `x-request-id` (minted when `headers`
    has none) is also the body's `request_id`."""
    rid = headers.get("x-request-id") or uuid.uuid4().hex
    body = anthropic_error_body(status, message, rid)
    return Response(body, status_code=status, media_type=JSON, headers={**headers, "x-request-id": rid})


def _request_id(request: Request) -> dict[str, str]:
    rid = getattr(request.state, "request_id", None)
    return {"x-request-id": rid} if rid else {}


def naming_the_object(message: str, code: str | None, request: Request) -> str:
    """A `not_found` message that says which object: the route asked for
    ("No such object: GET /admin/v1/orgs/acme/squads/research."). Another org's
    object and a missing one still answer alike: the path is the caller's own."""
    if code != "not_found":
        return message
    return f"{message.rstrip('.')}: {request.method} {path_shown(request)}."


def path_shown(request: Request) -> str:
    """The request's path for an error message: as the client sent it (still percent-encoded, so a
    `%0A` does not become a line break), cut at `MAX_PATH_SHOWN` characters with its length given."""
    sent = request.scope.get("raw_path", b"").decode("latin-1") or request.url.path
    return sent if len(sent) <= MAX_PATH_SHOWN else f"{sent[:MAX_PATH_SHOWN]}… ({len(sent)} characters)"


def door_refused(request: Request, status: int, code: str | None) -> str:
    """Count, log and store a refusal at the door (`turnout_ingress.guard.door`), with the caller's org and
    key when known (`validation.authenticate` sets them). Returns the request's id, minted onto
    `request.state.request_id` when it had none, so the answer's `x-request-id` is the stored row's."""
    rid: str | None = getattr(request.state, "request_id", None)
    if not rid:
        rid = request.state.request_id = uuid.uuid4().hex
    door = getattr(request.app.state, "door", None)  # `turnout_ingress.guard.door.DoorRefusals`, set by the app factory
    if door is not None:
        state = request.state
        door.refused(
            request.scope["path"],
            status,
            code,
            getattr(state, "key", None),
            org=getattr(state, "org", None),
            method=request.scope.get("method", ""),
            request_id=rid,
        )
    return rid


async def _rejected(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestRejected)
    door_refused(request, exc.status_code, exc.code)
    headers = {**exc.headers, **_request_id(request)}
    if exc.status_code == 401:
        headers["www-authenticate"] = "Bearer"
    message = naming_the_object(exc.message, exc.code, request)
    if answers_anthropic(request.scope["path"], request.headers):  # the 401 names `x-api-key`, as they send it
        return _anthropic(exc.status_code, ANTHROPIC_UNAUTHORIZED if exc.status_code == 401 else message, headers)
    return error_response(
        exc.status_code,
        message,
        error_type=exc.error_type,
        code=exc.code,
        param=exc.param,
        headers=headers,
    )


async def _unavailable(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, GatewayUnavailable)
    door_refused(request, 503, exc.code)
    headers = {**_request_id(request), "retry-after": str(exc.retry_after_s)}
    if answers_anthropic(request.scope["path"], request.headers):  # scope's path: no URL built on the hot path
        return _anthropic(503, exc.message, headers)
    return error_response(503, exc.message, error_type="service_unavailable", code=exc.code, headers=headers)


_HTTP_TYPES = {404: "not_found_error", 405: "invalid_request_error"}
_HTTP_CODES = {404: "unknown_route", 405: "method_not_allowed"}
MAX_PATH_SHOWN = 200
"""The longest request path an unknown-route error quotes (characters); a longer one is cut and its length given."""


async def _http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    rid = door_refused(request, exc.status_code, _HTTP_CODES.get(exc.status_code, "http_error"))
    message = {404: "Unknown route.", 405: "Method not allowed on this route."}.get(exc.status_code, str(exc.detail))
    headers = {"x-request-id": rid, **(exc.headers or {})}
    allow = allowed(request.app.router.routes, request.scope) if exc.status_code == 405 else None
    if allow is not None:  # every method the path takes, not only those of the route Starlette tried
        headers = {k: v for k, v in headers.items() if k.lower() != "allow"} | {"allow": allow}
    shown = path_shown(request)
    if answers_anthropic(request.url.path, request.headers):  # Anthropic callers get Anthropic's shape
        return _anthropic(exc.status_code, f"{message} ({request.method} {shown})", headers)
    return error_response(
        exc.status_code,
        f"{message} ({request.method} {shown})",
        error_type=_HTTP_TYPES.get(exc.status_code, "invalid_request_error"),
        code=_HTTP_CODES.get(exc.status_code, "http_error"),
        headers=headers,
    )


async def _validation(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    door_refused(request, 400, "invalid_request")
    first = exc.errors()[0] if exc.errors() else {}
    param = ".".join(str(p) for p in first.get("loc", ())[1:]) or None
    return error_response(
        400,
        f"Invalid request: {first.get('msg', 'validation failed')}",
        error_type="invalid_request_error",
        param=param,
        headers=_request_id(request),
    )


async def _too_deep(request: Request, exc: Exception) -> Response:
    door_refused(request, 400, "invalid_request")
    return error_response(
        400,
        "The request body is nested too deeply.",
        error_type="invalid_request_error",
        code="invalid_request",
        param="body",
        headers=_request_id(request),
    )


async def _client_gone(request: Request, exc: Exception) -> Response:
    return Response(status_code=499)  # the client left while sending its body; nobody reads this


async def _unexpected(request: Request, exc: Exception) -> Response:
    """A 500 for a fault of the gateway's own, in the route's error shape, closing the connection
    (the server drops it after the error; the header tells the client not to reuse it)."""
    message = "The gateway hit an internal error; the request was not completed."
    headers = {**_request_id(request), "connection": "close"}
    if answers_anthropic(request.url.path, request.headers):
        return _anthropic(500, message, headers)
    return error_response(500, message, error_type="server_error", code="internal_error", headers=headers)


def install(app: FastAPI) -> None:
    """Register the handler table on `app`."""
    app.add_exception_handler(RequestRejected, _rejected)
    app.add_exception_handler(GatewayUnavailable, _unavailable)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(RecursionError, _too_deep)
    app.add_exception_handler(ClientDisconnect, _client_gone)
    app.add_exception_handler(Exception, _unexpected)
