"""`Idempotency-Key` bindings: a client's key bound to the request that first used it.

Owns: the two single-key scripts that bind a client's `Idempotency-Key` (per gateway key,
`keys.idempotency_key`) to a request id and body digest, and release that binding so the
client's retry runs. The ingress joins the owner's result through `JobQueue.join`.
Must not import: services, FastAPI, httpx, arq.
"""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from turnout.errors import GatewayUnavailable
from turnout.state import keys
from turnout.state.bounds import REQUEST_REDIS_TIMEOUT_S
from turnout.state.errors import STATE_ERRORS, state_errors

# KEYS[1] idempotency key   ARGV[1] "<request id>:<body digest>" as claimed
_RELEASE_IDEMPOTENCY = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""

# KEYS[1] idempotency key   ARGV: request id, body digest, ttl s
_IDEMPOTENCY = """
local owner = redis.call('get', KEYS[1])
if owner then return owner end
redis.call('set', KEYS[1], ARGV[1] .. ':' .. ARGV[2], 'EX', ARGV[3])
return false
"""


def queue_unreachable() -> GatewayUnavailable:
    """The 503 `redis_unavailable` (Retry-After 1 s) of a queue operation that could not reach Redis."""
    return GatewayUnavailable(
        "The gateway's queue is unreachable right now; retry shortly.", retry_after_s=1, code="redis_unavailable"
    )


class IdempotencyConflict(Exception):
    """An `Idempotency-Key` reused with a different request body (answer 409)."""

    def __init__(self, owner_request_id: str) -> None:
        super().__init__(owner_request_id)
        self.owner_request_id = owner_request_id


class Idempotency:
    """The bindings over `redis` (a client with binary responses, shared by the process)."""

    def __init__(self, redis: Redis) -> None:
        self._claim = redis.register_script(_IDEMPOTENCY)
        self._release = redis.register_script(_RELEASE_IDEMPOTENCY)

    async def claim(
        self, org: str, key: str, idempotency_key: str, body_digest: str, request_id: str, ttl_s: int
    ) -> str | None:
        """Bind `Idempotency-Key` of gateway key `key` of `org` to this request, or find the request
        it is bound to (`keys.idempotency_key`: per gateway key).

        Returns:
            None when this request now owns the key; else the request id that
            owns it (the caller joins that request's result).

        Raises:
            IdempotencyConflict: the key was used with a different body.
            GatewayUnavailable: Redis unreachable.
        """
        scoped = keys.idempotency_key(org, key, idempotency_key)
        try:
            async with asyncio.timeout(REQUEST_REDIS_TIMEOUT_S):
                owner = await self._claim(keys=[scoped], args=[request_id, body_digest, ttl_s])
        except STATE_ERRORS as exc:
            raise queue_unreachable() from exc
        if not owner:
            return None
        owner_id, _, owner_digest = (owner.decode() if isinstance(owner, bytes) else owner).partition(":")
        if owner_digest != body_digest:
            raise IdempotencyConflict(owner_id)
        return owner_id

    async def release(self, org: str, key: str, idempotency_key: str, body_digest: str, request_id: str) -> None:
        """Unbind `Idempotency-Key` of gateway key `key` of `org` if `request_id` (with
        `body_digest`) still holds it, so the client's retry runs.

        Raises:
            StateUnavailable: Redis unreachable.
        """
        with state_errors():
            await self._release(
                keys=[keys.idempotency_key(org, key, idempotency_key)],
                args=[f"{request_id}:{body_digest}"],
            )
