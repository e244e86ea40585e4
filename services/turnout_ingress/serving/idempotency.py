"""`Idempotency-Key` at the ingress: claim the key for a request, or find who holds it.

Owns: checking the header and binding it (through the queue's one Lua
claim) to a request id. Used by `/v1/chat/completions` and `/v1/messages`:
one header of 1 to 255 characters (`key_of`); the same key with another body
is a 409 `idempotency_key_reused`; a retry with the same key and body joins
the first request's result. A *stream* is never replayed nor joined: its
answer is not stored, so a second stream with the key of a stream that
started (committed: its first chunk went out) is refused with 409
`idempotency_stream_started` (the caller sends a new key, or asks without
`stream` for a replayable answer). A stream that did not start (it was
answered with an error) releases its key, so the client's retry runs.
Must not import: `turnout_ingress.app`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.datastructures import Headers
from starlette.responses import Response

from turnout.core.deadline import Deadline
from turnout.errors import RequestRejected
from turnout.state.jobs import IdempotencyConflict
from turnout.tenancy.identity import Identity

if TYPE_CHECKING:
    from turnout_ingress.state import IngressState

HEADER = "idempotency-key"
MAX_KEY_CHARS = 255


def key_of(headers: Headers) -> str | None:
    """The request's `Idempotency-Key`, None when it sent none.

    Read before the request is admitted against its key's limits, so a
    refused key costs nothing.

    Raises:
        RequestRejected: 400 `invalid_request` (`param: Idempotency-Key`)
            for a key outside 1 to 255 characters, or for two or more
            `Idempotency-Key` headers (which of them the client meant is
            not known, and a replay must not depend on a guess).
    """
    key = headers.get(HEADER)
    if key is None:
        return None
    sent = len(headers.getlist(HEADER))
    if sent > 1:
        raise RequestRejected(
            400,
            f"Send one `Idempotency-Key` header; this request has {sent}.",
            param="Idempotency-Key",
            code="invalid_request",
        )
    if not 0 < len(key) <= MAX_KEY_CHARS:
        raise RequestRejected(
            400,
            f"`Idempotency-Key` must be 1 to {MAX_KEY_CHARS} characters.",
            param="Idempotency-Key",
            code="invalid_request",
        )
    return key


async def claim(
    state: IngressState, key: str | None, raw: bytes, identity: Identity, request_id: str, deadline: Deadline
) -> str | None:
    """Bind `key` to `request_id`, or name the request already bound to it.

    Args:
        key: the `Idempotency-Key` header as `key_of` read it, None when absent.
        raw: the request body as received (its SHA-256 is what must match).
        identity: the caller (keys are per gateway key of an org).
        request_id: this request's id.
        deadline: this request's deadline (the key lives its budget plus
            `gateway.result_ttl_s`).

    Returns:
        None when there is no key or this request now owns it; else the id of
        the request that owns it (to join).

    Raises:
        RequestRejected: 409 for a key used with another body.
        GatewayUnavailable: Redis unreachable.
    """
    if key is None:
        return None
    budget_s = int(deadline.budget_s)
    try:
        return await state.queue.idempotency.claim(
            identity.org,
            identity.key,
            key,
            hashlib.sha256(raw).hexdigest(),
            request_id,
            budget_s + state.config.raw.gateway.result_ttl_s,
        )
    except IdempotencyConflict as exc:
        raise RequestRejected(
            409,
            "This Idempotency-Key was already used with a different request body.",
            error_type="invalid_request_error",
            code="idempotency_key_reused",
            param="Idempotency-Key",
        ) from exc


async def stream_once(
    state: IngressState,
    key: str | None,
    raw: bytes,
    identity: Identity,
    request_id: str,
    deadline: Deadline,
    serve: Callable[[], Awaitable[Response]],
) -> Response:
    """Serve a stream under `key` (module doc): refused when a stream with it
    started; the key released again when this one is answered with an error.

    Raises:
        RequestRejected: 409 as `claim`, and 409 `idempotency_stream_started`.
    """
    if await claim(state, key, raw, identity, request_id, deadline) is not None:
        raise stream_already_started()
    response = await serve()
    if key is not None and response.status_code != 200:
        await state.queue.idempotency.release(
            identity.org, identity.key, key, hashlib.sha256(raw).hexdigest(), request_id
        )
    return response


def stream_already_started() -> RequestRejected:
    """The 409 for a stream whose key is already bound (streams are not replayed)."""
    return RequestRejected(
        409,
        "A stream with this Idempotency-Key was already started; streams are not replayed. "
        "Send a new key, or the request without `stream` to get a replayable answer.",
        error_type="invalid_request_error",
        code="idempotency_stream_started",
        param="Idempotency-Key",
    )
