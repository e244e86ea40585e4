"""The breaker transitions stream in Redis: appending events, reading a time range.

Owns: the Redis side of the breaker timeline (`keys.BREAKER_TRANSITIONS_STREAM`): each entry
holds one encoded event (`r`, `turnout.observability.breaker_log`). Appends trim the stream
by length (`XADD MAXLEN ~ N`) and by age (`XTRIM MINID ~`, in the same round trip).
Transitions are rare (a trip, a close, a new Retry-After rest): no plain request writes here.
Every function raises `StateUnavailable` when Redis is unreachable.
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

from collections.abc import Sequence

from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.errors import state_errors

MAX_LEN = 20_000
"""Events kept at most (about: Redis trims whole nodes)."""
KEEP_S = 7 * 86_400.0
"""Seconds an event is kept at most."""


async def append(
    redis: Redis, events: Sequence[bytes], *, now_s: float, max_len: int = MAX_LEN, keep_s: float = KEEP_S
) -> None:
    """Append encoded `events` in one round trip (a pipeline, no transaction), keeping about
    `max_len` entries and none older than `keep_s` seconds before `now_s` (epoch s).

    Raises:
        StateUnavailable: Redis unreachable (some events may be in).
    """
    if not events:
        return
    with state_errors():
        async with redis.pipeline(transaction=False) as pipe:
            for raw in events:
                pipe.xadd(keys.BREAKER_TRANSITIONS_STREAM, {"r": raw}, maxlen=max_len, approximate=True)
            pipe.xtrim(
                keys.BREAKER_TRANSITIONS_STREAM, minid=str(max(0, int((now_s - keep_s) * 1000))), approximate=True
            )
            await pipe.execute()


async def read_since(redis: Redis, since_s: float, limit: int = MAX_LEN) -> list[bytes]:
    """The encoded events appended at or after `since_s` (epoch s, by Redis's clock at the append),
    oldest first, at most `limit`.

    Raises:
        StateUnavailable: Redis unreachable.
    """
    with state_errors():
        got = await redis.xrange(keys.BREAKER_TRANSITIONS_STREAM, min=str(max(0, int(since_s * 1000))), count=limit)
    return [fields[b"r"] for _, fields in got]
