"""The audit log of admin writes, in Redis (a capped stream).

Owns: the entry schema and the stream's writes and reads. One entry per
write request to the admin API — who (the operator, or an org's admin key by
name), what (method, route path, the names of the body's top-level fields,
the answer's status), when (the entry's stream id: Redis `TIME` in ms).
Never a value from the body: no secret can reach it.
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import msgspec
from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.errors import maps_state_errors

AUDIT_MAX = 100_000
"""Entries kept (approximate, `XADD MAXLEN ~`); older ones are dropped first."""


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

    def __init__(self, redis: Redis, *, max_entries: int = AUDIT_MAX) -> None:
        self._redis = redis
        self._max = max_entries

    async def append(self, entry: AuditEntry) -> None:
        """Add one entry (its time is Redis's).

        Raises:
            StateUnavailable: Redis unreachable.
        """
        await self._redis.xadd(keys.AUDIT_STREAM, {"e": _encode.encode(entry)}, maxlen=self._max, approximate=True)

    async def read(
        self,
        *,
        since_s: float | None = None,
        until_s: float | None = None,
        page_size: int = 500,
    ) -> AsyncIterator[dict[str, Any]]:
        """Entries with `since_s <= at <= until_s` (epoch s, inclusive; None: unbounded), oldest first.

        Each as a dict: `at` (ISO-8601 UTC, ms) and the `AuditEntry` fields.

        Raises:
            StateUnavailable: Redis unreachable.
        """
        low = f"{max(0, int(since_s * 1000))}-0" if since_s is not None else "-"
        high = f"{int(until_s * 1000)}-{2**63 - 1}" if until_s is not None else "+"
        while True:
            page = await self._redis.xrange(keys.AUDIT_STREAM, min=low, max=high, count=page_size)
            for entry_id, fields in page:
                ms = int(entry_id.decode().partition("-")[0])
                yield {"at": iso_ms(ms), **msgspec.to_builtins(_decode.decode(fields[b"e"]))}
            if len(page) < page_size:
                return
            ms_text, _, seq = page[-1][0].decode().partition("-")
            low = f"{ms_text}-{int(seq) + 1}"
