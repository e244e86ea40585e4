"""The attempt records stream in Redis: appending batches, reading forwards and backwards.

Owns: the Redis side of SPEC §9's records — `XADD MAXLEN ~ N` of encoded
rows in one pipelined round trip, with each request's open attempts (started
and not ended) kept in a hash (`keys.open_attempts_key`), and paged XRANGE /
XREVRANGE reads of `turnout:records` (`keys.RECORDS_STREAM`). Each entry
holds the row's org (`org`, to skip other orgs without decoding) and the
encoded row (`r`).
Every function raises `StateUnavailable` when Redis is unreachable (an
async iterator: at the read that fails).
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import NamedTuple

from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.errors import state_errors


class Entry(NamedTuple):
    """One row to append: its org, its encoded form, and its open-attempt bookkeeping.

    Attributes:
        org: the row's org (stored beside the row, to filter without decoding).
        raw: the encoded row.
        request_id: the row's request, or None when the row has no attempt id.
        attempt_id: the attempt's id, or None (no open-attempts bookkeeping).
        started: True: the attempt is now open (HSET `raw` into the request's
            hash); False: it ended or was lost (HDEL).
    """

    org: str
    raw: bytes
    request_id: str | None = None
    attempt_id: str | None = None
    started: bool = False


async def append(redis: Redis, rows: Sequence[Entry], *, max_len: int, open_ttl_s: int) -> None:
    """Append `rows` in one pipelined round trip, trimming the stream to about
    `max_len` entries, and keep each row's request's open-attempts hash
    (`keys.open_attempts_key`, expiring `open_ttl_s` seconds after its last start).

    Raises:
        StateUnavailable: Redis unreachable (nothing, or not everything, was written).
    """
    with state_errors():
        async with redis.pipeline(transaction=False) as pipe:
            for row in rows:
                pipe.xadd(keys.RECORDS_STREAM, {"org": row.org, "r": row.raw}, maxlen=max_len, approximate=True)
                if row.request_id is None or not row.attempt_id:
                    continue
                open_key = keys.open_attempts_key(row.request_id)
                if row.started:
                    pipe.hset(open_key, row.attempt_id, row.raw)  # type: ignore[arg-type]  # bytes are sent as they are
                    pipe.expire(open_key, open_ttl_s)
                else:
                    pipe.hdel(open_key, row.attempt_id)
            await pipe.execute()


async def open_attempts(redis: Redis, request_id: str) -> list[bytes]:
    """The encoded `started` rows of `request_id`'s attempts not ended (any order).

    Raises:
        StateUnavailable: Redis unreachable.
    """
    with state_errors():
        held: dict[bytes, bytes] = await redis.hgetall(keys.open_attempts_key(request_id))  # type: ignore[misc]
    return list(held.values())


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


async def newest_first(
    redis: Redis, high: str, low: str = "-", batch: int = 500
) -> AsyncIterator[tuple[str, bytes, bytes]]:
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
