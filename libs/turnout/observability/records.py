"""Attempt records (SPEC §9): one row per attempt, in a bounded Redis Stream.

Owns: the row's fields, built from the loop's `Dispatch` (the `started`
row, at dispatch) and `AttemptRecord` (the `ended` row, same `attempt_id`);
the observer that produces them for every attempt, failed or not; the
writer that buffers rows in memory and appends them in the background in
pipelined batches (`XADD MAXLEN ~ N`), keeping each request's attempts
started and not ended in a hash (`keys.open_attempts_key`) so a job's
re-run can write the dead run's attempts as lost. Reading them back for
export is `turnout.observability.records_export`.
Must not import: services, FastAPI, arq.

Durability: a started row is flushed at once and the attempt waits until
the row is sent to Redis (written to the connection; at most
`REQUEST_REDIS_TIMEOUT_S`, and not at all while Redis is failing or hangs,
nor when the request's health read found Redis unreachable) before its
upstream call, so a process killed mid-call leaves its trace. Redis's reply
is read while the call runs: a flush Redis refuses puts the row back in the
buffer, as any flush's. Ended rows are batched (at most `flush_interval_s`
late).

Bounds: the buffer holds at most `buffer_max` rows; a row that finds it full
is dropped and counted (`dropped`, and the `on_drop` hook). The stream keeps
about `max_len` entries (Redis trims whole nodes, so a little more).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec
from redis.asyncio import Redis

from turnout.core.attempt_phases import IN_FLIGHT_KIND, Phase, as_lost
from turnout.core.plan import Role
from turnout.core.types import FailureKind
from turnout.state import records_stream
from turnout.state.bounds import REQUEST_REDIS_TIMEOUT_S
from turnout.state.errors import StateUnavailable
from turnout.state.flusher import Flusher

if TYPE_CHECKING:
    from turnout.adapters.base import Usage
    from turnout.catalog import Catalog, CatalogSource
    from turnout.core.loop import AttemptRecord, Dispatch
    from turnout.router import RequestInfo

log = logging.getLogger("turnout.records")

FIELDS = (
    "ts",
    "request_id",
    "org",
    "squad",
    "key",
    "requested_model",
    "served_model",
    "provider",
    "attempt",
    "status",
    "class",
    "kind",
    "latency_ms",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "is_retry",
    "is_fallback",
    "is_reroute",
    "is_byok_fallback",
    "is_strategy",
    "is_plan_fallback",
    "is_comparable",
    "strategy",
    "is_rerun",
    "lost",
    "attempt_id",
)
"""Columns of a record, in export order. `ts` is the attempt's start (epoch s;
ISO-8601 UTC in exports); `key` is the gateway key's name; `status` the
upstream HTTP status or null; `class` the SPEC §3 disposition.
`is_comparable`: made on a comparable alternate (`fallback.comparable`, role
`comparable_alternate`; `is_fallback` is true too). `is_rerun`:
made by a re-run of the job after the worker running it died; `lost`: the
attempt's process died before it ended (`kind` and `class` `lost`; status,
latency, tokens and cost null: unknown, it may have been billed). An
attempt still running reads as `kind` `in_flight`. A stored row also
carries, outside the export, `phase` (`started`, `ended`, `lost`), `run`
(the job's run, from 1), `deadline_ts` (started rows), `role` (the
target's role in the plan), `delay_before_s` (seconds waited before the
attempt) and `delay_reason` (`backoff`, `retry_after`, `fallback_backoff`
or null), which the dashboard shows, `should_retry` (ended rows: the
provider's `x-should-retry`, true / false, or null when it sent none), `ttft_ms`
(ended rows: a committed stream's time to its first chunk in ms, else null), and
`considered` (ended rows: the plan's offers not attempted as of the attempt's
end, `[{provider, model, catalog_model, reason, reopen_in_s}]`,
`turnout.core.considered`; the request's last attempt holds the request's:
a field of the request's own rows, not a row of its own, so phases, exports,
spend and the Activity list read rows as before; a request that made no
attempt has no row to hold it)."""

OPEN_ATTEMPTS_TTL_S = 86_400
"""Seconds a request's open-attempts hash lives after its last started row."""

_encode = msgspec.json.Encoder()
_decode = msgspec.json.Decoder(dict[str, Any])


def _identity(info: RequestInfo, ts: float, attempt_id: str) -> dict[str, Any]:
    """The fields every row of an attempt shares."""
    return {
        "ts": round(ts, 3),
        "request_id": info.request_id,
        "org": info.org,
        "squad": info.squad,
        "key": info.key,
        "requested_model": info.requested_model,
        "attempt_id": attempt_id,
        "run": info.run,
        "is_rerun": info.run > 1,
        "lost": False,
    }


def attempt_row(
    info: RequestInfo,
    record: AttemptRecord,
    usage: Usage,
    catalog: Catalog,
    ts: float,
    attempt_id: str = "",
) -> dict[str, Any]:
    """The SPEC §9 row of one ended attempt; cost from catalog prices, 0 unless it succeeded.

    Args:
        info: the request's identity.
        record: the attempt's decision record.
        usage: its token counts (zero on failure).
        catalog: for the target's price (USD per million tokens).
        ts: the attempt's start, epoch seconds.
        attempt_id: the id its `started_row` carried ("" when none was written).
    """
    ok = record.kind is FailureKind.SUCCESS
    target = record.target
    price = catalog.prices.get(target.key)
    tokens_in, tokens_out = (usage.input_tokens, usage.output_tokens) if ok else (0, 0)
    return _identity(info, ts, attempt_id) | {
        "phase": str(Phase.ENDED),
        "served_model": target.model,
        "provider": target.provider,
        "attempt": record.number,
        "status": record.status,
        "class": str(record.disposition),
        "kind": str(record.kind),
        "latency_ms": round(record.duration_ms, 3),
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "cost_usd": round(price.cost_usd(tokens_in, tokens_out), 10) if (ok and price) else 0.0,
        "is_retry": record.is_retry,
        "is_fallback": record.is_fallback,
        "is_reroute": record.is_reroute,
        "is_byok_fallback": record.is_byok_fallback,
        "is_strategy": record.is_strategy,
        "is_plan_fallback": record.is_plan_fallback,
        "is_comparable": record.is_comparable,
        "strategy": info.strategy if record.is_strategy else None,
        "role": str(record.role),
        "delay_before_s": round(record.delay_before_s, 3),
        "delay_reason": record.delay_reason,
        "should_retry": record.should_retry,
        "considered": [msgspec.to_builtins(c) for c in record.considered],
        "ttft_ms": round(record.first_token_ms, 3) if record.first_token_ms is not None else None,
    }


def started_row(info: RequestInfo, dispatch: Dispatch, *, attempt_id: str, ts: float) -> dict[str, Any]:
    """The `started` row of an attempt about to call its upstream: what is known
    before the outcome (outcome fields null, `kind` `in_flight`).

    Args:
        info: the request's identity (`deadline_s` becomes `deadline_ts`).
        dispatch: the loop's decision to attempt.
        attempt_id: the id its ended row will carry.
        ts: the attempt's start, epoch seconds.
    """
    entry = dispatch.entry
    target = entry.target
    return _identity(info, ts, attempt_id) | {
        "phase": str(Phase.STARTED),
        "served_model": target.model,
        "provider": target.provider,
        "attempt": dispatch.number,
        "status": None,
        "class": None,
        "kind": IN_FLIGHT_KIND,
        "latency_ms": None,
        "input_tokens": None,
        "output_tokens": None,
        "cost_usd": None,
        "is_retry": dispatch.is_retry,
        "is_fallback": entry.is_fallback,
        "is_reroute": entry.is_reroute,
        "is_byok_fallback": dispatch.is_byok_fallback,
        "is_strategy": entry.is_strategy,
        "is_plan_fallback": entry.role is Role.PLAN_FALLBACK,
        "is_comparable": entry.is_comparable,
        "strategy": info.strategy if entry.is_strategy else None,
        "role": str(entry.role),
        "delay_before_s": round(dispatch.delay_before_s, 3),
        "delay_reason": dispatch.delay_reason,
        "deadline_ts": round(info.deadline_s, 3) if info.deadline_s is not None else None,
    }


class Receipt:
    """A started row's progress: `sent` turns True once the row is written to
    Redis's connection, `stored` once Redis has answered that it holds it.

    One waiter at a time (`RecordWriter.settle`) holds a future of its own in
    `waiter`, so a wait that runs out cancels only itself, and the flush that
    sends the row later still marks it (a shield would cost the waiter a step
    of the event loop after the send). A flush that fails wakes the waiter too,
    with `sent` still False.
    """

    __slots__ = ("sent", "stored", "waiter")

    def __init__(self) -> None:
        self.sent = False
        self.stored = False
        self.waiter: asyncio.Future[None] | None = None

    def mark_sent(self) -> None:
        """The row is on its way to Redis: wake its waiter, if any."""
        self.sent = True
        self.wake()

    def mark_stored(self) -> None:
        """Redis holds the row."""
        self.sent = self.stored = True
        self.wake()

    def wake(self) -> None:
        """Wake the waiter, if any, whatever became of the row."""
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


_Item = tuple[dict[str, Any], Receipt | None]


def _mark_sent(receipts: list[Receipt]) -> None:
    for receipt in receipts:
        receipt.mark_sent()


class RecordWriter:
    """Buffers rows and appends them to the records stream in the background.

    A `started` row also goes into its request's open-attempts hash, an
    `ended` or `lost` row takes it out (`keys.open_attempts_key`).

    Args:
        redis: the process's client.
        max_len: approximate stream bound (`XADD MAXLEN ~ max_len`), >= 1.
        buffer_max: rows held in memory at most; more are dropped.
        batch_max: rows per pipelined round trip.
        flush_interval_s: longest a row waits before a flush starts.
        on_drop: called with the number of rows dropped.
        open_attempts: keep the open-attempts hash (a process whose jobs run again after it
            dies); False: every row is only appended (one command a row instead of 2 or 3).
    """

    def __init__(
        self,
        redis: Redis,
        *,
        max_len: int,
        buffer_max: int = 10_000,
        batch_max: int = 500,
        flush_interval_s: float = 0.25,
        on_drop: Callable[[int], None] | None = None,
        open_attempts: bool = True,
    ) -> None:
        self._redis = redis
        self._open_attempts = open_attempts
        self._max_len = max_len
        self._buffer: deque[_Item] = deque()
        self._buffer_max = buffer_max
        self._batch_max = batch_max
        self._on_drop = on_drop
        self._flusher = Flusher(self.flush, interval_s=flush_interval_s, name="turnout-records-flush")
        self.dropped = 0
        self.written = 0
        self.failing = False
        """True since a flush Redis refused or a started row outwaited `settle`, until a flush
        succeeds (started rows are then not waited for)."""

    def __len__(self) -> int:
        return len(self._buffer)

    def rows(self) -> list[dict[str, Any]]:
        """The rows buffered now, oldest first (a copy)."""
        return [row for row, _ in self._buffer]

    def add(self, row: dict[str, Any]) -> bool:
        """Queue `row` for writing (never blocks). False when dropped: buffer full."""
        return self._push(row, None)

    def add_started(self, row: dict[str, Any]) -> Receipt | None:
        """Queue a `started` row and start a flush now (never blocks).

        Returns:
            The row's receipt, sent once the row is written to Redis and stored
            once Redis holds it (pass it to `settle`), or None when the row was
            dropped (buffer full).
        """
        receipt = Receipt()
        if not self._push(row, receipt):
            return None
        self._flusher.wake()
        return receipt

    async def settle(self, receipt: Receipt | None, timeout_s: float = REQUEST_REDIS_TIMEOUT_S) -> bool:
        """Wait until the row of `receipt` (from `add_started`) is sent to Redis, at
        most `timeout_s` seconds, and not at all while Redis is failing or the
        flusher is not running; a flush that fails ends the wait. True when sent
        (Redis's reply may still be on its way)."""
        if receipt is None:
            return False
        if receipt.sent:
            return True
        if self.failing or not self._flusher.running:
            return False
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        receipt.waiter = waiter
        try:
            async with asyncio.timeout(timeout_s):  # not `wait_for`: no task, one step fewer after the reply
                await waiter
        except TimeoutError:
            self.failing = True  # Redis hangs: the next attempts do not wait, until a flush succeeds
            return False
        finally:
            if receipt.waiter is waiter:
                receipt.waiter = None
        return receipt.sent

    def _push(self, row: dict[str, Any], receipt: Receipt | None) -> bool:
        if len(self._buffer) >= self._buffer_max:
            self._drop(1)
            return False
        self._buffer.append((row, receipt))
        if len(self._buffer) >= self._batch_max:
            self._flusher.wake()
        return True

    def _drop(self, n: int) -> None:
        self.dropped += n
        if self._on_drop is not None:
            self._on_drop(n)

    def _entry(self, row: dict[str, Any]) -> records_stream.Entry:
        """`row` as a stream entry: a `started` row opens its attempt, any other closes it (when
        the writer keeps open attempts)."""
        attempt_id = row.get("attempt_id") if self._open_attempts else None
        return records_stream.Entry(
            org=row["org"],
            raw=_encode.encode(row),
            request_id=str(row["request_id"]) if attempt_id else None,
            attempt_id=str(attempt_id) if attempt_id else None,
            started=row.get("phase") == Phase.STARTED,
        )

    async def flush(self) -> int:
        """Write everything buffered now, in batches. Returns rows written.

        A batch Redis refuses goes back to the front of the buffer (what no
        longer fits is dropped) and the flush stops; the next one retries.
        """
        total = 0
        while self._buffer:
            batch = [self._buffer.popleft() for _ in range(min(self._batch_max, len(self._buffer)))]
            receipts = [receipt for _, receipt in batch if receipt is not None]
            try:
                await records_stream.append(
                    self._redis,
                    [self._entry(row) for row, _ in batch],
                    max_len=self._max_len,
                    open_ttl_s=OPEN_ATTEMPTS_TTL_S,
                    on_sent=partial(_mark_sent, receipts) if receipts else None,
                )
            except StateUnavailable as exc:
                self.failing = True
                room = max(0, self._buffer_max - len(self._buffer))
                self._buffer.extendleft(reversed(batch[:room]))
                if len(batch) > room:
                    self._drop(len(batch) - room)
                for receipt in receipts:
                    receipt.wake()  # its attempt goes on without waiting out its bound
                log.warning("attempt records not written (%s); %d buffered", exc.kind, len(self._buffer))
                break
            self.failing = False
            for receipt in receipts:
                receipt.mark_stored()
            total += len(batch)
            self.written += len(batch)
        return total

    async def mark_lost(self, request_id: str, run: int) -> int:
        """Write a `lost` row for each attempt of `request_id` started by a run
        before `run` and never ended (its worker died), and forget them.

        Called by a job's re-run when it starts (`run` = arq's job try).
        Returns the rows written.

        Raises:
            StateUnavailable: Redis unreachable (the caller bounds the wait).
        """
        held = await records_stream.open_attempts(self._redis, request_id)
        orphans = [row for raw in held if int((row := _decode.decode(raw)).get("run") or 1) < run]
        if not orphans:
            return 0
        await records_stream.append(
            self._redis,
            [self._entry(as_lost(row)) for row in orphans],
            max_len=self._max_len,
            open_ttl_s=OPEN_ATTEMPTS_TTL_S,
        )
        self.written += len(orphans)
        return len(orphans)

    def start(self) -> None:
        """Start the background flusher on the running loop."""
        self._flusher.start()

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the flusher and write what is still buffered (up to `timeout_s`)."""
        await self._flusher.stop(timeout_s)
        if self._buffer:
            log.warning("%d attempt records lost at shutdown", len(self._buffer))


class _Started(msgspec.Struct, frozen=True):
    """`RecordsObserver`'s handle: the attempt's id, start (epoch s) and its started row's receipt."""

    attempt_id: str
    ts: float
    written: Any  # Receipt | None


class RecordsObserver:
    """A `RouteObserver` that writes a started and an ended row per attempt through a `RecordWriter`."""

    def __init__(self, writer: RecordWriter, catalog: CatalogSource, clock: Callable[[], float] = time.time) -> None:
        self._writer = writer
        self._catalog = catalog
        self._clock = clock

    def attempt_started(self, info: RequestInfo, dispatch: Dispatch) -> object:
        """Queue the attempt's started row, flushed at once. See `RouteObserver`."""
        ts = self._clock()
        attempt_id = uuid.uuid4().hex
        written = self._writer.add_started(started_row(info, dispatch, attempt_id=attempt_id, ts=ts))
        return _Started(attempt_id, ts, written)

    async def attempt_dispatched(self, handle: object) -> None:
        """Wait (bounded, `RecordWriter.settle`) until the started row is sent to Redis."""
        if isinstance(handle, _Started):
            await self._writer.settle(handle.written)

    def attempt_ended(self, handle: object, info: RequestInfo, record: AttemptRecord, usage: Usage) -> None:
        """Queue the attempt's ended row (same `attempt_id`). See `RouteObserver`."""
        if isinstance(handle, _Started):
            ts, attempt_id = handle.ts, handle.attempt_id
        else:
            ts, attempt_id = self._clock() - record.duration_ms / 1000.0, ""
        self._writer.add(attempt_row(info, record, usage, self._catalog.current, ts, attempt_id))

    def waited(self, info: RequestInfo, delay_s: float, reason: str) -> None:
        """Nothing: waits are not attempts."""
