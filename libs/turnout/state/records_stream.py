"""The attempt records stream in Redis: appending batches, reading forwards and backwards.

Owns: the Redis side of SPEC §9's records — `XADD MAXLEN ~ N` of encoded
rows in one script run per batch, with each request's open attempts (started
and not ended) kept in a hash (`keys.open_attempts_key`), and paged XRANGE /
XREVRANGE reads of `turnout:records` (`keys.RECORDS_STREAM`). Each entry
holds the row's org (`org`, to skip other orgs without decoding) and the
encoded row (`r`).
Every function raises `StateUnavailable` when Redis is unreachable (an
async iterator: at the read that fails).
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, NamedTuple

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

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


# KEYS[1] the records stream, then per row the open-attempts hash of its request (the stream again
# for a row without one)   ARGV: max len, open ttl s, then per row: op ('s' started, 'e' ended,
# 'a' neither), org, encoded row, attempt id
_APPEND = """
local max_len, ttl = ARGV[1], ARGV[2]
for i = 2, #KEYS do
  local j = 3 + (i - 2) * 4
  local op, attempt = ARGV[j], ARGV[j + 3]
  redis.call('xadd', KEYS[1], 'MAXLEN', '~', max_len, '*', 'org', ARGV[j + 1], 'r', ARGV[j + 2])
  if op == 's' then
    redis.call('hset', KEYS[i], attempt, ARGV[j + 2])
    redis.call('expire', KEYS[i], ttl)
  elseif op == 'e' then
    redis.call('hdel', KEYS[i], attempt)
  end
end
return #KEYS - 1
"""
_APPEND_SHA = hashlib.sha1(_APPEND.encode()).hexdigest()  # Redis names a script by its SHA-1


async def append(
    redis: Redis,
    rows: Sequence[Entry],
    *,
    max_len: int,
    open_ttl_s: int,
    on_sent: Callable[[], None] | None = None,
) -> None:
    """Append `rows` in one round trip (one script: the rows packed once, written at once),
    trimming the stream to about `max_len` entries, and keep each row's request's
    open-attempts hash (`keys.open_attempts_key`, expiring `open_ttl_s` seconds after its
    last start).

    `on_sent`, when given, is called once the script's bytes are written to
    the connection, before Redis's reply is read (`_run_telling_sent`); it is
    not called when the send itself fails.

    Raises:
        StateUnavailable: Redis unreachable (nothing was written), or the
            connection lost before the reply (the rows may or may not be in).
    """
    if not rows:
        return
    names: list[str] = [keys.RECORDS_STREAM]
    args: list[str | int | bytes] = [max_len, open_ttl_s]
    for row in rows:
        if row.request_id is None or not row.attempt_id:
            names.append(keys.RECORDS_STREAM)
            args += ["a", row.org, row.raw, ""]
        else:
            names.append(keys.open_attempts_key(row.request_id))
            args += ["s" if row.started else "e", row.org, row.raw, row.attempt_id]
    with state_errors():
        await _run_telling_sent(redis, names, args, on_sent or _nothing)


def _nothing() -> None:
    """The default `on_sent`."""


async def _run_telling_sent(redis: Redis, names: list[str], args: list[Any], on_sent: Callable[[], None]) -> None:
    """Run the append script on a connection of `redis`'s pool, calling `on_sent` between
    the send and the read of the reply.

    Why not `redis.evalsha`: the client's command sends and reads in one call,
    and a started row's attempt needs only the send (a process killed after it
    still leaves the row: its bytes are on their way), so it can call its
    upstream while the reply travels. bench/README.md "The started record sent,
    not answered" has the figures.

    After a Redis restart the first EVALSHA comes back NOSCRIPT and the script
    itself follows at once; a process killed in that one round trip loses the
    rows it carried.

    The connection is used as the client's own command does (redis-py 5.x
    `Redis.execute_command`): taken from the pool, dropped on any failure or
    cancellation, so no reply is left unread, and given back.

    Raises:
        redis.exceptions.RedisError, OSError: as the client's command raises
            them (the caller maps them).
    """
    pool = redis.connection_pool
    connection = await pool.get_connection("EVALSHA")  # type: ignore[no-untyped-call]
    try:
        try:
            await connection.send_command("EVALSHA", _APPEND_SHA, len(names), *names, *args)
            on_sent()
            await connection.read_response()
        except NoScriptError:  # Redis restarted, or the first append: send the script itself
            await connection.send_command("EVAL", _APPEND, len(names), *names, *args)
            await connection.read_response()
    except BaseException:
        await connection.disconnect()
        raise
    finally:
        await pool.release(connection)


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
