"""The audit log of admin writes, in Redis: authenticated entries kept by time, refusals sampled apart.

Owns: the entry schema and the streams' writes and reads. One entry per
authenticated write request to the admin API (and per dashboard login) —
who (the operator, or an org's admin key by name), what (method, route path,
the names of the body's top-level fields, the answer's status), when (the
entry's stream id: Redis `TIME` in ms) — kept `retention_s` (default 90 days,
`XADD MINID ~`) and never evicted by count, so no volume of writes erases
one (#40 item 5). Writes refused before a caller was known go to a separate
capped stream as samples (`RefusalSampler`: at most one per `SAMPLE_S` per
process, each saying how many writes it stands for).
Never a value from the body: no secret can reach it.
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import msgspec
from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.errors import maps_state_errors

RETENTION_S = 90 * 86400.0
"""How long an authenticated entry is kept (`TURNOUT_AUDIT_RETENTION_DAYS`, default 90 days)."""
REFUSED_MAX = 10_000
"""Samples of unauthenticated writes kept (approximate, `XADD MAXLEN ~`); older ones are dropped first."""
SAMPLE_S = 1.0
"""At most one sample of unauthenticated writes per this many seconds per process."""


class RefusalSampler:
    """Which unauthenticated writes become a sample: the first after each `interval_s` (pure; clock injected).

    Args:
        interval_s: the least time between two samples, seconds.
        clock: monotonic seconds.
    """

    def __init__(self, interval_s: float = SAMPLE_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval_s = interval_s
        self._clock = clock
        self._last: float | None = None
        self._pending = 0

    def take(self) -> int:
        """Count one write; the number of writes the sample stands for (this one included), or 0: no sample now."""
        self._pending += 1
        now = self._clock()
        if self._last is not None and now - self._last < self._interval_s:
            return 0
        self._last, count, self._pending = now, self._pending, 0
        return count


class AuditEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One admin write.

    Attributes:
        who: `operator`, `key <org>/<key name>` (an org's admin key), or
            `unauthenticated` (refused before a caller was known).
        org: the org the route names, or None (`/admin/v1/orgs`, `/secrets/rotate`).
        method: HTTP method.
        path: the route path as called, without its query string.
        fields: names of the request body's top-level fields (never values).
        status: the answer's HTTP status.
    """

    who: str
    org: str | None
    method: str
    path: str
    fields: tuple[str, ...] = ()
    status: int


_encode = msgspec.json.Encoder()
_decode = msgspec.json.Decoder(AuditEntry)


def iso_ms(epoch_ms: int) -> str:
    """Epoch ms as ISO-8601 UTC with milliseconds."""
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@maps_state_errors
class AuditLog:
    """Append and read the audit stream.

    Args:
        redis: the process's client.
        max_entries: entries kept (approximate).
    """

    def __init__(
        self,
        redis: Redis,
        *,
        retention_s: float = RETENTION_S,
        refused_max: int = REFUSED_MAX,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._redis = redis
        self._retention_s = retention_s
        self._refused_max = refused_max
        self._clock = clock

    async def append(self, entry: AuditEntry) -> None:
        """Add one authenticated entry (its time is Redis's); entries older than the retention are trimmed.

        Raises:
            StateUnavailable: Redis unreachable.
        """
        oldest_ms = max(0, int((self._clock() - self._retention_s) * 1000))
        await self._redis.xadd(keys.AUDIT_STREAM, {"e": _encode.encode(entry)}, minid=oldest_ms, approximate=False)

    async def append_sample(self, entry: AuditEntry, count: int) -> None:
        """Add one sample of unauthenticated writes standing for `count` of them (capped stream).

        Raises:
            StateUnavailable: Redis unreachable.
        """
        await self._redis.xadd(
            keys.AUDIT_REFUSED_STREAM,
            {"e": _encode.encode(entry), "n": count},
            maxlen=self._refused_max,
            approximate=True,
        )

    async def read(
        self,
        *,
        since_s: float | None = None,
        until_s: float | None = None,
        page_size: int = 500,
        samples: bool = False,
    ) -> AsyncIterator[dict[str, Any]]:
        """Entries with `since_s <= at <= until_s` (epoch s, inclusive; None: unbounded), oldest first.

        Each as a dict: `at` (ISO-8601 UTC, ms) and the `AuditEntry` fields; with `samples`, the
        samples of unauthenticated writes instead, each with `count` (the writes it stands for).

        Raises:
            StateUnavailable: Redis unreachable.
        """
        low = f"{max(0, int(since_s * 1000))}-0" if since_s is not None else "-"
        high = f"{int(until_s * 1000)}-{2**63 - 1}" if until_s is not None else "+"
        while True:
            stream = keys.AUDIT_REFUSED_STREAM if samples else keys.AUDIT_STREAM
            page = await self._redis.xrange(stream, min=low, max=high, count=page_size)
            for entry_id, fields in page:
                ms = int(entry_id.decode().partition("-")[0])
                found = {"at": iso_ms(ms), **msgspec.to_builtins(_decode.decode(fields[b"e"]))}
                yield {**found, "count": int(fields[b"n"])} if samples else found
            if len(page) < page_size:
                return
            ms_text, _, seq = page[-1][0].decode().partition("-")
            low = f"{ms_text}-{int(seq) + 1}"
