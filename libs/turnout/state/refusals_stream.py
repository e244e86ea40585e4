"""The door refusals' streams in Redis: appending batches, reading one stream newest first.

Owns: the Redis side of the refusal rows (`turnout_ingress.guard.door.refusal_row`): one stream
per org (`keys.refusals_key(org)`) and one for callers not identified
(`keys.refusals_key(None)`), each `XADD MAXLEN ~ N`, so a flood of one tenant (or of
callers without a key) evicts only its own stream's rows, never another org's nor an
attempt record (`turnout:records` is another key). Each entry holds the encoded row
(`r`). Every function raises `StateUnavailable` when Redis is unreachable (an async
iterator: at the read that fails).
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.errors import state_errors

ID_SLACK_S = 60.0
"""Seconds a stream id (Redis's clock when the row was flushed) may differ from the row's `ts` (the
process's clock when it refused): flush delay and clock skew. `id_bounds` widens a time range by it,
and the caller filters on `ts` exactly."""


async def append(redis: Redis, rows: Sequence[tuple[str | None, bytes]], *, max_len: int) -> None:
    """Append `rows` ((org or None, encoded row)) to their streams in one round trip (a pipeline,
    no transaction), trimming each stream to about `max_len` entries (`XADD MAXLEN ~`).

    Raises:
        StateUnavailable: Redis unreachable (some rows may be in).
    """
    if not rows:
        return
    with state_errors():
        async with redis.pipeline(transaction=False) as pipe:
            for org, raw in rows:
                pipe.xadd(keys.refusals_key(org), {"r": raw}, maxlen=max_len, approximate=True)
            await pipe.execute()


def id_bounds(since_s: float | None, until_s: float | None) -> tuple[str, str]:
    """The XREVRANGE (high, low) ids covering rows with `since_s <= ts <= until_s` (epoch s; None:
    open), each widened by `ID_SLACK_S` (the caller still filters on `ts`)."""
    high = "+" if until_s is None else str(int((until_s + ID_SLACK_S) * 1000))
    low = "-" if since_s is None else str(max(0, int((since_s - ID_SLACK_S) * 1000)))
    return high, low


async def newest_first(
    redis: Redis, org: str | None, *, high: str = "+", low: str = "-", batch: int = 200
) -> AsyncIterator[bytes]:
    """The encoded rows of `org`'s stream (None: callers not identified) from id `high` down to
    `low` (`id_bounds`), newest first, read in batches of `batch`.

    Raises:
        StateUnavailable: Redis unreachable.
    """
    name = keys.refusals_key(org)
    while True:
        with state_errors():
            got = await redis.xrevrange(name, max=high, min=low, count=batch)
        for _, fields in got:
            yield fields[b"r"]
        if len(got) < batch:
            return
        high = "(" + got[-1][0].decode()
