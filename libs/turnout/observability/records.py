"""Attempt records (SPEC §9): one row per attempt, in a bounded Redis Stream.

Owns: the row's fields, built from the loop's `AttemptRecord`; the observer
that produces one row per attempt, failed or not; the writer that buffers
rows in memory and appends them in the background in pipelined batches
(`XADD MAXLEN ~ N`), so the request path never waits on Redis; and reading
one org's rows back, in pages, for export (JSONL or CSV).
Must not import: services, FastAPI, arq.

Bounds: the buffer holds at most `buffer_max` rows; a row that finds it full
is dropped and counted (`dropped`, and the `on_drop` hook). The stream keeps
about `max_len` entries (Redis trims whole nodes, so a little more).
"""

from __future__ import annotations

import csv
import io
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec
from redis.asyncio import Redis
from redis.exceptions import RedisError

from turnout.core.types import FailureKind
from turnout.state import keys
from turnout.state.flusher import Flusher

if TYPE_CHECKING:
    from turnout.adapters.base import Usage
    from turnout.catalog import Catalog, CatalogSource
    from turnout.core.loop import AttemptRecord, Dispatch
    from turnout.router import RequestInfo

log = logging.getLogger("turnout.records")

FIELDS = (
    "ts", "request_id", "org", "squad", "key", "requested_model", "served_model", "provider", "attempt",
    "status", "class", "kind", "latency_ms", "input_tokens", "output_tokens", "cost_usd",
    "is_retry", "is_fallback", "is_reroute", "is_byok_fallback", "is_strategy", "is_plan_fallback", "strategy",
)
"""Columns of a record, in export order. `ts` is the attempt's start (epoch s;
ISO-8601 UTC in exports); `key` is the gateway key's name; `status` the
upstream HTTP status or null; `class` the SPEC §3 disposition. A stored row
also carries, outside the export, `role` (the target's role in the plan),
`delay_before_s` (seconds waited before the attempt) and `delay_reason`
(`backoff`, `retry_after`, `fallback_backoff` or null), which the dashboard
shows."""

CLOCK_SLACK_S = 60.0
"""Stream ids are Redis's clock at the flush, `ts` the writer's clock at the
attempt: a `since` bound starts reading this many seconds earlier and
filters on `ts`. An `until` bound reads on to the end of the (bounded)
stream, since a flush delayed by a Redis outage gives late ids."""

_encode = msgspec.json.Encoder()
_decode = msgspec.json.Decoder(dict[str, Any])


def attempt_row(
    info: "RequestInfo", record: "AttemptRecord", usage: "Usage", catalog: "Catalog", ts: float
) -> dict[str, Any]:
    """The SPEC §9 row of one attempt; cost from catalog prices, 0 unless it succeeded.

    Args:
        info: the request's identity.
        record: the attempt's decision record.
        usage: its token counts (zero on failure).
        catalog: for the target's price (USD per million tokens).
        ts: the attempt's start, epoch seconds.
    """
    ok = record.kind is FailureKind.SUCCESS
    target = record.target
    price = catalog.prices.get(target.key)
    tokens_in, tokens_out = (usage.input_tokens, usage.output_tokens) if ok else (0, 0)
    return {
        "ts": round(ts, 3), "request_id": info.request_id, "org": info.org, "squad": info.squad,
        "key": info.key, "requested_model": info.requested_model, "served_model": target.model,
        "provider": target.provider, "attempt": record.number, "status": record.status,
        "class": str(record.disposition), "kind": str(record.kind), "latency_ms": round(record.duration_ms, 3),
        "input_tokens": tokens_in, "output_tokens": tokens_out,
        "cost_usd": round(price.cost_usd(tokens_in, tokens_out), 10) if (ok and price) else 0.0,
        "is_retry": record.is_retry, "is_fallback": record.is_fallback, "is_reroute": record.is_reroute,
        "is_byok_fallback": record.is_byok_fallback, "is_strategy": record.is_strategy,
        "is_plan_fallback": record.is_plan_fallback, "strategy": info.strategy if record.is_strategy else None,
        "role": str(record.role), "delay_before_s": round(record.delay_before_s, 3),
        "delay_reason": record.delay_reason,
    }


class RecordWriter:
    """Buffers rows and appends them to the records stream in the background.

    Args:
        redis: the process's client.
        max_len: approximate stream bound (`XADD MAXLEN ~ max_len`), >= 1.
        buffer_max: rows held in memory at most; more are dropped.
        batch_max: rows per pipelined round trip.
        flush_interval_s: longest a row waits before a flush starts.
        on_drop: called with the number of rows dropped.
    """

    def __init__(
        self, redis: Redis, *, max_len: int, buffer_max: int = 10_000, batch_max: int = 500,
        flush_interval_s: float = 0.25, on_drop: Callable[[int], None] | None = None,
    ) -> None:
        self._redis = redis
        self._max_len = max_len
        self._buffer: deque[dict[str, Any]] = deque()
        self._buffer_max = buffer_max
        self._batch_max = batch_max
        self._on_drop = on_drop
        self._flusher = Flusher(self.flush, interval_s=flush_interval_s, name="turnout-records-flush")
        self.dropped = 0
        self.written = 0

    def __len__(self) -> int:
        return len(self._buffer)

    def add(self, row: dict[str, Any]) -> bool:
        """Queue `row` for writing (never blocks). False when dropped: buffer full."""
        if len(self._buffer) >= self._buffer_max:
            self._drop(1)
            return False
        self._buffer.append(row)
        if len(self._buffer) >= self._batch_max:
            self._flusher.wake()
        return True

    def _drop(self, n: int) -> None:
        self.dropped += n
        if self._on_drop is not None:
            self._on_drop(n)

    async def flush(self) -> int:
        """Write everything buffered now, in batches. Returns rows written.

        A batch Redis refuses goes back to the front of the buffer (what no
        longer fits is dropped) and the flush stops; the next one retries.
        """
        total = 0
        while self._buffer:
            batch = [self._buffer.popleft() for _ in range(min(self._batch_max, len(self._buffer)))]
            try:
                async with self._redis.pipeline(transaction=False) as pipe:
                    for row in batch:
                        pipe.xadd(
                            keys.RECORDS_STREAM, {"org": row["org"], "r": _encode.encode(row)},
                            maxlen=self._max_len, approximate=True,
                        )
                    await pipe.execute()
            except (RedisError, OSError) as exc:
                room = max(0, self._buffer_max - len(self._buffer))
                self._buffer.extendleft(reversed(batch[:room]))
                if len(batch) > room:
                    self._drop(len(batch) - room)
                log.warning("attempt records not written (%s); %d buffered", type(exc).__name__, len(self._buffer))
                break
            total += len(batch)
            self.written += len(batch)
        return total

    def start(self) -> None:
        """Start the background flusher on the running loop."""
        self._flusher.start()

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the flusher and write what is still buffered (up to `timeout_s`)."""
        await self._flusher.stop(timeout_s)
        if self._buffer:
            log.warning("%d attempt records lost at shutdown", len(self._buffer))


class RecordsObserver:
    """A `RouteObserver` that writes one row per attempt through a `RecordWriter`."""

    def __init__(self, writer: RecordWriter, catalog: "CatalogSource", clock: Callable[[], float] = time.time) -> None:
        self._writer = writer
        self._catalog = catalog
        self._clock = clock

    def attempt_started(self, info: "RequestInfo", dispatch: "Dispatch") -> object:
        """The handle is the attempt's start time (epoch seconds)."""
        return self._clock()

    def attempt_ended(self, handle: object, info: "RequestInfo", record: "AttemptRecord", usage: "Usage") -> None:
        """Queue the attempt's row. See `RouteObserver`."""
        ts = handle if isinstance(handle, float) else self._clock() - record.duration_ms / 1000.0
        self._writer.add(attempt_row(info, record, usage, self._catalog.current, ts))

    def waited(self, info: "RequestInfo", delay_s: float, reason: str) -> None:
        """Nothing: waits are not attempts."""


async def read_rows(
    redis: Redis, *, org: str, since_s: float | None = None, until_s: float | None = None, page_size: int = 500,
) -> AsyncIterator[dict[str, Any]]:
    """One org's rows with `since_s <= ts <= until_s` (epoch s; None: unbounded), oldest first.

    Reads the stream with XRANGE in pages of `page_size`; rows of other orgs
    are skipped without decoding.

    Raises:
        RedisError, OSError: Redis unreachable.
    """
    low = f"{max(0, int((since_s - CLOCK_SLACK_S) * 1000))}-0" if since_s is not None else "-"
    wanted = org.encode()
    while True:
        entries = await redis.xrange(keys.RECORDS_STREAM, min=low, max="+", count=page_size)
        for entry_id, fields in entries:
            if fields.get(b"org") != wanted:
                continue
            row = _decode.decode(fields[b"r"])
            ts = float(row.get("ts", 0.0))
            if (since_s is not None and ts < since_s) or (until_s is not None and ts > until_s):
                continue
            yield row
        if len(entries) < page_size:
            return
        ms, _, seq = entries[-1][0].decode().partition("-")
        low = f"{ms}-{int(seq) + 1}"


def iso_ts(epoch_s: float) -> str:
    """Epoch seconds as ISO-8601 UTC with milliseconds (`2025-01-02T03:04:05.678Z`)."""
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _export_row(row: dict[str, Any]) -> dict[str, Any]:
    out = {name: row.get(name) for name in FIELDS}
    out["ts"] = iso_ts(float(row.get("ts", 0.0)))
    return out


def jsonl_lines(rows: Iterable[dict[str, Any]]) -> bytes:
    """Rows as JSON Lines (one object per line, `FIELDS` in order)."""
    return b"".join(_encode.encode(_export_row(r)) + b"\n" for r in rows)


def csv_header() -> bytes:
    """The CSV header line."""
    return csv_lines([], header=True)


def csv_lines(rows: Iterable[dict[str, Any]], *, header: bool = False) -> bytes:
    """Rows as CSV (RFC 4180; booleans `true`/`false`, null as empty)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\r\n")
    if header:
        writer.writerow(FIELDS)
    for row in rows:
        out = _export_row(row)
        writer.writerow(
            "" if v is None else ("true" if v is True else "false" if v is False else v) for v in out.values()
        )
    return buf.getvalue().encode()
