"""The attempt records stream in Redis: appending batches, reading forwards and backwards.

Owns: the Redis side of SPEC §9's records — `XADD MAXLEN ~ N` of encoded
rows in one pipelined round trip, and paged XRANGE / XREVRANGE reads of
`turnout:records` (`keys.RECORDS_STREAM`). Each entry holds the row's org
(`org`, to skip other orgs without decoding) and the msgpack row (`r`).
Every function raises `StateUnavailable` when Redis is unreachable (an
async iterator: at the read that fails).
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.errors import state_errors


async def append(redis: Redis, rows: Sequence[tuple[str, bytes]], *, max_len: int) -> None:
    """Append `(org, encoded row)` entries in one pipelined round trip, trimming
    the stream to about `max_len` entries.

    Raises:
        StateUnavailable: Redis unreachable (nothing, or not everything, was written).
    """
    with state_errors():
        async with redis.pipeline(transaction=False) as pipe:
            for org, raw in rows:
                pipe.xadd(keys.RECORDS_STREAM, {"org": org, "r": raw}, maxlen=max_len, approximate=True)
            await pipe.execute()


async def oldest_first(redis: Redis, low: str, page_size: int) -> AsyncIterator[tuple[bytes, bytes]]:
    """(org, encoded row) of every entry from id `low` (`-` or `<ms>-<seq>`) to the end, oldest first,
    read in pages of `page_size`.

    Raises:
        StateUnavailable: Redis unreachable.
    """
    while True:
        with state_errors():
            entries = await redis.xrange(keys.RECORDS_STREAM, min=low, max="+", count=page_size)
        for _, fields in entries:
            yield fields.get(b"org", b""), fields[b"r"]
        if len(entries) < page_size:
            return
        ms, _, seq = entries[-1][0].decode().partition("-")
        low = f"{ms}-{int(seq) + 1}"


async def newest_first(redis: Redis, high: str, low: str = "-", batch: int = 500) -> AsyncIterator[tuple[str, bytes, bytes]]:
    """(stream id, org, encoded row) from `high` down to `low`, newest first, in batches.

    Args:
        high, low: XREVRANGE bounds (`+`, `-`, `<ms>-<seq>`, `(` exclusive).

    Raises:
        StateUnavailable: Redis unreachable.
    """
    while True:
        with state_errors():
            got = await redis.xrevrange(keys.RECORDS_STREAM, max=high, min=low, count=batch)
        for entry_id, fields in got:
            yield entry_id.decode(), fields.get(b"org", b""), fields[b"r"]
        if len(got) < batch:
            return
        high = "(" + got[-1][0].decode()
