"""The ingress's writer of door-refusal rows: a bounded buffer flushed to Redis in the background.

Owns: `RefusalWriter`, the `RowSink` of `turnout_ingress.guard.door.DoorRefusals`. A row is
taken without blocking the refusal's answer: appended to an in-memory buffer of at
most `buffer_max` rows, written by a background `Flusher` in batches (one pipelined
round trip each, `turnout.state.refusals_stream.append`) to its org's stream or the
stream of callers not identified. Rows of callers not identified (no org) first pass a
per-process `RateCap` per (route, status, code), so a flood of garbage stores a bounded
number of rows; the rest are only counted (`turnout_door_refusals_total`, and here).
A row is dropped, and counted in `turnout_refusal_rows_dropped_total{reason}`, when
capped (`capped`), when the buffer is full (`buffer_full`), or when Redis refuses its
batch (`redis_unavailable`: rows are best effort, never retried, so an outage holds
no memory).
Must not import: `turnout_ingress.app`.
"""

from __future__ import annotations

import logging
from collections import deque

import msgspec
from prometheus_client import Counter
from redis.asyncio import Redis

from turnout.state import refusals_stream
from turnout.state.errors import StateUnavailable
from turnout.state.flusher import Flusher
from turnout_ingress.guard.door import RateCap, RefusalRow

log = logging.getLogger("turnout.ingress.refusals")

UNIDENTIFIED_ROWS_PER_S = 2
"""Rows per second per (route, status, code) one ingress process stores for callers not identified."""

_encode = msgspec.json.Encoder()


class RefusalWriter:
    """Buffers refusal rows and appends them to their streams in the background (module doc).

    Args:
        redis: the process's client.
        max_len: approximate bound of each stream (`XADD MAXLEN ~`), >= 1.
        dropped: the drop counter by `reason` (`Metrics.refusal_rows_dropped`).
        cap: the per-process cap of rows of callers not identified.
        buffer_max: rows held in memory at most.
        batch_max: rows per pipelined round trip.
        flush_interval_s: longest a row waits before a flush starts, seconds.
    """

    def __init__(
        self,
        redis: Redis,
        *,
        max_len: int,
        dropped: Counter,
        cap: RateCap | None = None,
        buffer_max: int = 2000,
        batch_max: int = 500,
        flush_interval_s: float = 0.25,
    ) -> None:
        self._redis = redis
        self._max_len = max_len
        self._cap = cap if cap is not None else RateCap(UNIDENTIFIED_ROWS_PER_S)
        self._buffer: deque[RefusalRow] = deque()
        self._buffer_max = buffer_max
        self._batch_max = batch_max
        self._flusher = Flusher(self.flush, interval_s=flush_interval_s, name="turnout-refusals-flush")
        self._dropped = dropped
        self.written = 0

    def __len__(self) -> int:
        return len(self._buffer)

    def add(self, row: RefusalRow) -> None:
        """Take `row` for writing (never blocks nor raises); capped or dropped rows are counted."""
        if row.org is None and not self._cap.take((row.route, row.status, row.code)):
            self._dropped.labels(reason="capped").inc()
            return
        if len(self._buffer) >= self._buffer_max:
            self._dropped.labels(reason="buffer_full").inc()
            return
        self._buffer.append(row)
        if len(self._buffer) >= self._batch_max:
            self._flusher.wake()

    async def flush(self) -> int:
        """Write everything buffered now, in batches; returns the rows written. A batch Redis refuses
        is dropped and counted, and the flush stops (the next one writes what came since)."""
        total = 0
        while self._buffer:
            batch = [self._buffer.popleft() for _ in range(min(self._batch_max, len(self._buffer)))]
            try:
                await refusals_stream.append(
                    self._redis, [(row.org, _encode.encode(row)) for row in batch], max_len=self._max_len
                )
            except StateUnavailable as exc:
                self._dropped.labels(reason="redis_unavailable").inc(len(batch))
                log.warning("door-refusal rows not written (%s); %d dropped", exc.kind, len(batch))
                break
            total += len(batch)
            self.written += len(batch)
        return total

    def start(self) -> None:
        """Start the background flusher on the running loop."""
        self._flusher.start()

    async def stop(self, timeout_s: float = 2.0) -> None:
        """Stop the flusher and write what is still buffered (up to `timeout_s` seconds)."""
        await self._flusher.stop(timeout_s)
