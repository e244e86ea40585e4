"""The Responses conversation store in Redis (README "The Responses surface").

Owns: keeping each stored Response of `POST /v1/responses` with its input items and its
whole conversation (the chat messages of every turn so far, its own output included),
scoped to the org and the gateway key that made it, for `ttl_s`; reading one back for
`previous_response_id`, `GET`, `DELETE` and `input_items`. Another key's or org's id, an
expired one and an unknown one read alike: None (the caller answers 404 and never says
which). Bounded memory: at most `per_org` stored responses per org, the oldest evicted
first (one Lua script, atomic); a document above `max_bytes` is not kept (`put` says so).
Must not import: services, FastAPI, httpx.

Redis layout (names in `turnout.state.keys`):
    turnout:resp:{org}:{response id}
        string: the JSON `StoredResponse`; expires `ttl_s` after it is written
    turnout:resp-index:{org}
        sorted set: response id -> written at (epoch ms); trimmed past `ttl_s` and to `per_org`
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

import msgspec
from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.errors import maps_state_errors

_PUT: Final = """
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', tonumber(ARGV[3]) - tonumber(ARGV[2]) * 1000)
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[5])
local evicted = 0
if over > 0 then
  local old = redis.call('ZPOPMIN', KEYS[2], over)
  for i = 1, #old, 2 do
    redis.call('UNLINK', ARGV[6] .. old[i])
    evicted = evicted + 1
  end
end
redis.call('EXPIRE', KEYS[2], ARGV[2])
return evicted
"""
"""KEYS: document, index. ARGV: document, ttl s, now ms, id, per-org cap, document key prefix.
Returns how many older responses were evicted for the cap."""


class StoredResponse(msgspec.Struct, frozen=True, kw_only=True):
    """One stored Response and what continuing it needs.

    Attributes:
        key: the gateway key (its name) that made it; only that key of that org reads it.
        response: the Response object as answered.
        input_items: this turn's input items, ids given (`input_items` pages).
        messages: the conversation as chat messages: every earlier turn's input and
            output, this turn's input, and this turn's output (instructions excluded).
        expires_at_s: epoch seconds after which it reads as absent.
        items: the same conversation as Responses input items (each turn's `input` as the
            client sent it, then its output items), which a follow-up sent natively to an
            `api: responses` offer replays; None in a document stored before they were kept.
    """

    key: str
    response: dict[str, Any]
    input_items: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    expires_at_s: float
    items: list[Any] | None = None


_encode = msgspec.json.Encoder()
_decode = msgspec.json.Decoder(StoredResponse)


@maps_state_errors
class ResponseStore:
    """Stored Responses in Redis (module doc).

    Args:
        redis: the process's client.
        ttl_s: how long a stored response is kept after it is written, seconds.
        per_org: most stored responses per org; beyond it the oldest are evicted.
        max_bytes: largest document kept (bytes of its JSON); larger ones are not stored.
        clock: epoch seconds (when a response is written, whether it has expired).
    """

    def __init__(
        self,
        redis: Redis,
        *,
        ttl_s: int,
        per_org: int,
        max_bytes: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._redis = redis
        self._ttl_s, self._per_org, self._max_bytes = ttl_s, per_org, max_bytes
        self._clock = clock
        self._put = redis.register_script(_PUT)

    async def put(
        self,
        org: str,
        key: str,
        response: dict[str, Any],
        input_items: list[dict[str, Any]],
        messages: list[dict[str, Any]],
        items: list[Any] | None = None,
    ) -> int | None:
        """Keep `response` (its `id` names it) for `org`'s gateway key `key`, with this turn's
        `input_items` and the conversation as chat `messages` and as Responses `items`.

        Returns:
            How many of the org's older responses were evicted for the cap, or None when
            the document is larger than `max_bytes` and was not kept.

        Raises:
            StateUnavailable: Redis is unreachable.
        """
        now_s = self._clock()
        doc = StoredResponse(
            key=key,
            response=response,
            input_items=input_items,
            messages=messages,
            expires_at_s=now_s + self._ttl_s,
            items=items,
        )
        raw = _encode.encode(doc)
        if len(raw) > self._max_bytes:
            return None
        rid = str(response["id"])
        evicted = await self._put(
            keys=[keys.response_key(org, rid), keys.response_index_key(org)],
            args=[raw, self._ttl_s, int(now_s * 1000), rid, self._per_org, keys.response_key(org, "")],
        )
        return int(evicted)

    async def get(self, org: str, key: str, response_id: str) -> StoredResponse | None:
        """The stored response `response_id` of `org`'s key `key`; None when there is none for
        that key (unknown, expired, deleted, evicted, or another key's or org's).

        Raises:
            StateUnavailable: Redis is unreachable.
        """
        if not response_id or len(response_id) > keys.MAX_RESPONSE_ID_CHARS:
            return None
        raw = await self._redis.get(keys.response_key(org, response_id))
        if raw is None:
            return None
        try:
            doc = _decode.decode(raw)
        except msgspec.DecodeError:
            return None
        if doc.key != key or doc.expires_at_s <= self._clock():
            return None
        return doc

    async def delete(self, org: str, key: str, response_id: str) -> bool:
        """Delete the stored response `response_id` of `org`'s key `key`; False when that key
        has none by that id (nothing is deleted then).

        Raises:
            StateUnavailable: Redis is unreachable.
        """
        if await self.get(org, key, response_id) is None:
            return False
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.unlink(keys.response_key(org, response_id))
            pipe.zrem(keys.response_index_key(org), response_id)
            await pipe.execute()
        return True
