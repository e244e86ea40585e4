"""Paged, newest-first reads of the attempt records for the dashboard.

Owns: turning the records stream (`turnout:records`, `turnout.observability.records`) into
pages of requests with `XREVRANGE` and a cursor, so a page costs about the
records it shows, not the stream's length; finding one request's rows; and
scanning a recent time window (Providers and Spend).
Must not import: FastAPI.

Paging. Requests are ordered by their newest row. A page reads newest first
and opens a group per request id; a group is *decided* once its attempt 1 is
read (or the read has gone `DECIDE_AFTER_S` older than its newest row, or the
stream ends). The page is the first `size` decided groups that pass the
filters; the next page starts just older than the last one's newest row
(`cursor`, an exclusive stream id) and skips the ids of shown or rejected
requests that still have rows past it (`skip`). One page reads at most
`scan_max` entries; a page that stops there says so and offers its cursor.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import msgspec
from redis.asyncio import Redis

from turnout.core.attempt_phases import Phase, resolve
from turnout.state import records_stream
from turnout_ingress.ui.activity import Filters, RequestSummary, summarize
from turnout_ingress.ui.figures import Row

BATCH = 500
"""Entries per XREVRANGE call."""

SCAN_MAX = 20_000
"""Entries one page reads at most."""

DECIDE_AFTER_S = 300.0
"""A request whose attempt 1 was not read this many seconds (by row `ts`)
older than its newest row is shown with the rows found (longer than any
budget's deadline; attempt 1 may have been dropped or trimmed)."""

CLOCK_SLACK_S = 60.0
"""Stream ids are Redis's clock at the flush, `ts` the writer's: a time bound
on ids is widened by this much and rows are then filtered on `ts`."""

_decode = msgspec.json.Decoder(dict[str, Any])
_decode_lite = msgspec.json.Decoder(Row)


class Page(msgspec.Struct, frozen=True, kw_only=True):
    """One Activity page.

    Attributes:
        requests: newest first.
        cursor: stream position for the next page (exclusive), None at the end.
        skip: request ids the next page must skip (already shown or rejected).
        scanned: stream entries read.
        truncated: stopped at `scan_max` before filling the page.
    """

    requests: tuple[RequestSummary, ...]
    cursor: str | None
    skip: tuple[str, ...]
    scanned: int
    truncated: bool


async def entries(
    redis: Redis, high: str, low: str = "-", batch: int = BATCH
) -> AsyncIterator[tuple[str, bytes, bytes]]:
    """(stream id, org, encoded row) from `high` down to `low`, newest first, in batches.

    Args:
        high, low: XREVRANGE bounds (`+`, `-`, `<ms>-<seq>`, `(` exclusive).

    Raises:
        StateUnavailable: Redis unreachable.
    """
    async for entry in records_stream.newest_first(redis, high, low, batch):
        yield entry


def _ms_id(epoch_s: float) -> str:
    return f"{max(0, int(epoch_s * 1000))}-0"


class _Group:
    __slots__ = ("decided", "entry_id", "newest_ts", "oldest_id", "rows")

    def __init__(self, entry_id: str, row: dict[str, Any]) -> None:
        self.entry_id = entry_id
        self.newest_ts = float(row.get("ts", 0.0))
        self.rows = [row]
        self.oldest_id = entry_id
        self.decided = _first(row)


def _first(row: dict[str, Any]) -> bool:
    """True for a row of a request's first attempt (not of a re-run): nothing of the request is older."""
    return int(row.get("attempt", 0)) <= 1 and not row.get("is_rerun")


async def read_page(
    redis: Redis,
    *,
    scope_org: str | None,
    filters: Filters,
    cursor: str | None = None,
    skip: frozenset[str] = frozenset(),
    size: int = 50,
    scan_max: int = SCAN_MAX,
    now_s: float | None = None,
) -> Page:
    """One page of requests, newest first (see the module docstring), one row per
    attempt (`turnout.core.attempt_phases.resolve` as of `now_s`, epoch s, default now).

    Args:
        scope_org: the only org readable (an org admin), or None (the operator).
        filters: what to show; `filters.org` is ignored when `scope_org` is set.
        cursor: where to start (from the previous page), None for the newest.
        skip: request ids to leave out (from the previous page).
        size: requests per page, >= 1.
        scan_max: entries read at most.

    Raises:
        StateUnavailable: Redis unreachable.
    """
    now_s = time.time() if now_s is None else now_s
    if scope_org is not None:
        filters = msgspec.structs.replace(filters, org=scope_org)
    org = filters.org or None
    wanted = org.encode() if org else None
    high = cursor or (_ms_id(filters.until_s + CLOCK_SLACK_S) if filters.until_s is not None else "+")
    low = _ms_id(filters.since_s - CLOCK_SLACK_S) if filters.since_s is not None else "-"
    scan = _PageScan(filters, skip, size, now_s)
    async for entry_id, entry_org, raw in entries(redis, high, low):
        scan.scanned += 1
        scan.last_id = entry_id
        if wanted is None or entry_org == wanted:
            scan.add(entry_id, _decode.decode(raw))
        if len(scan.shown) >= size or scan.scanned >= scan_max:
            return scan.stopped()
    return scan.ended()


class _PageScan:
    """One page's read in progress (see the module docstring): the groups opened, in the order
    read (newest first), how many of them are judged, and the requests shown so far."""

    def __init__(self, filters: Filters, skip: frozenset[str], size: int, now_s: float) -> None:
        self.filters = filters
        self.skip = skip
        self.size = size
        self.now_s = now_s
        self.groups: dict[str, _Group] = {}
        self.order: list[str] = []
        self.shown: list[RequestSummary] = []
        self.skipped_first: dict[str, str] = {}  # a skipped request's attempt-1 entry, once read
        self.done = 0  # groups of `order` already judged, in order
        self.scanned = 0
        self.last_id: str | None = None

    def add(self, entry_id: str, row: dict[str, Any]) -> None:
        """Take the row of stream entry `entry_id` (of the page's org) into its request's group,
        decide the groups it is older than by `DECIDE_AFTER_S`, and judge what is decided."""
        rid = str(row.get("request_id"))
        first = _first(row)
        if rid in self.skip:
            if first:
                self.skipped_first[rid] = entry_id
        elif (group := self.groups.get(rid)) is None:
            self.groups[rid] = _Group(entry_id, row)
            self.order.append(rid)
        else:
            group.rows.append(row)
            group.oldest_id = entry_id
            group.decided = group.decided or first
        ts = float(row.get("ts", 0.0))
        for pending in self.order[self.done :]:
            g = self.groups[pending]
            if not g.decided and g.newest_ts - ts > DECIDE_AFTER_S:
                g.decided = True
        self._judge(final=False)

    def _judge(self, final: bool) -> None:
        """Show, in order, the decided groups (`final`: every group) that pass the filters, until
        the page is full or an undecided group comes."""
        while self.done < len(self.order) and len(self.shown) < self.size:
            group = self.groups[self.order[self.done]]
            if not (group.decided or final):
                return
            rows = resolve(group.rows, self.now_s)
            if self.filters.matches(rows):
                self.shown.append(summarize(group.entry_id, rows))
            self.done += 1

    def ended(self) -> Page:
        """The page when the stream (or the time window) has ended: every group judged, no cursor."""
        self._judge(final=True)
        return Page(requests=tuple(self.shown), cursor=None, skip=(), scanned=self.scanned, truncated=False)

    def stopped(self) -> Page:
        """The page when the read stopped (full, or at `scan_max`), with the next page's cursor and skip."""
        truncated = len(self.shown) < self.size
        if self.done == 0:
            # Nothing judged: resume at the first open group (inclusive), or just past what was read.
            resume = (
                self.groups[self.order[0]].entry_id if self.order else ("(" + self.last_id if self.last_id else None)
            )
            return Page(
                requests=(),
                cursor=resume,
                skip=tuple(sorted(self._still_skipped(resume))),
                scanned=self.scanned,
                truncated=truncated,
            )
        boundary = self.groups[self.order[self.done - 1]].entry_id
        straddling = {rid for rid in self.order[: self.done] if _id_key(self.groups[rid].oldest_id) < _id_key(boundary)}
        return Page(
            requests=tuple(self.shown),
            cursor="(" + boundary,
            skip=tuple(sorted(self._still_skipped(boundary) | straddling)),
            scanned=self.scanned,
            truncated=truncated,
        )

    def _still_skipped(self, boundary: str | None) -> set[str]:
        """The skipped requests with rows left past `boundary` (one whose attempt 1 lies newer than
        the next page's start has none)."""
        return {
            rid
            for rid in self.skip
            if boundary is None
            or rid not in self.skipped_first
            or _id_key(self.skipped_first[rid]) <= _id_key(boundary)
        }


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.lstrip("(").partition("-")
    return int(ms), int(seq or 0)


async def find_request(
    redis: Redis,
    request_id: str,
    *,
    scope_org: str | None,
    at: str | None = None,
    scan_max: int = SCAN_MAX,
    now_s: float | None = None,
) -> RequestSummary | None:
    """One request's summary, or None when it is not found (or another org's, for an org admin);
    one row per attempt as of `now_s` (epoch s, default now).

    Args:
        at: the request's newest stream id when known (links from the Activity
            list carry it): the read starts there and stops `DECIDE_AFTER_S`
            older; else it starts at the newest entry.
        scan_max: entries read at most.

    Raises:
        StateUnavailable: Redis unreachable.
    """
    wanted = scope_org.encode() if scope_org else None
    rows: list[dict[str, Any]] = []
    newest: str | None = None
    low = "-"
    if at is not None:
        low = _ms_id(int(at.lstrip("(").split("-")[0]) / 1000.0 - DECIDE_AFTER_S - CLOCK_SLACK_S)
    scanned = 0
    async for entry_id, entry_org, raw in entries(redis, at.lstrip("(") if at else "+", low):
        scanned += 1
        if scanned > scan_max:
            break
        if wanted is not None and entry_org != wanted:
            continue
        if request_id.encode() not in raw:
            continue
        row = _decode.decode(raw)
        if row.get("request_id") != request_id:
            continue
        newest = newest or entry_id
        rows.append(row)
        if _first(row):
            break
    now_s = time.time() if now_s is None else now_s
    return summarize(newest, resolve(rows, now_s)) if rows and newest else None


async def window_rows(
    redis: Redis,
    *,
    scope_org: str | None,
    since_s: float,
    scan_max: int,
) -> tuple[list[Row], bool]:
    """Rows with `ts >= since_s` (epoch s), newest first, of `scope_org` (None: every org).

    Returns:
        The rows, and True when the read stopped at `scan_max` entries (older
        rows in the window were not read).

    Raises:
        StateUnavailable: Redis unreachable.
    """
    wanted = scope_org.encode() if scope_org else None
    out: list[Row] = []
    scanned = 0
    async for _, entry_org, raw in entries(redis, "+", _ms_id(since_s - CLOCK_SLACK_S), batch=2000):
        scanned += 1
        if scanned > scan_max:
            return out, True
        if wanted is not None and entry_org != wanted:
            continue
        row = _decode_lite.decode(raw)
        if row.ts >= since_s and row.phase != Phase.STARTED:  # an attempt counts once, when it ends or is lost
            out.append(row)
    return out, False
