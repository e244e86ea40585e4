"""Reading attempt records back (SPEC §9): one org's rows, one per attempt, as JSONL or CSV.

Owns: paging one org's rows out of the records stream (`turnout.observability.records`
writes it), collapsing each attempt's started / ended / lost rows into one
(`turnout.core.attempt_phases`), and rendering the export formats.
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator, Iterable
from datetime import UTC, datetime
from typing import Any

import msgspec
from redis.asyncio import Redis

from turnout.core.attempt_phases import Resolver
from turnout.observability.records import FIELDS
from turnout.state import records_stream

CLOCK_SLACK_S = 60.0
"""Stream ids are Redis's clock at the flush, `ts` the writer's clock at the
attempt: a `since` bound starts reading this many seconds earlier and
filters on `ts`. An `until` bound reads on to the end of the (bounded)
stream, since a flush delayed by a Redis outage gives late ids."""

_encode = msgspec.json.Encoder()
_decode = msgspec.json.Decoder(dict[str, Any])


async def read_rows(
    redis: Redis,
    *,
    org: str,
    since_s: float | None = None,
    until_s: float | None = None,
    page_size: int = 500,
) -> AsyncIterator[dict[str, Any]]:
    """One org's rows with `since_s <= ts <= until_s` (epoch s; None: unbounded), oldest first.

    Reads the stream with XRANGE in pages of `page_size`; rows of other orgs
    are skipped without decoding.

    Raises:
        StateUnavailable: Redis unreachable.
    """
    low = f"{max(0, int((since_s - CLOCK_SLACK_S) * 1000))}-0" if since_s is not None else "-"
    wanted = org.encode()
    async for entry_org, raw in records_stream.oldest_first(redis, low, page_size):
        if entry_org != wanted:
            continue
        row = _decode.decode(raw)
        ts = float(row.get("ts", 0.0))
        if (since_s is not None and ts < since_s) or (until_s is not None and ts > until_s):
            continue
        yield row


async def attempts(rows: AsyncIterator[dict[str, Any]], now_s: float) -> AsyncIterator[dict[str, Any]]:
    """`rows` (from `read_rows`) one per attempt as of `now_s` (epoch s): ended
    attempts in stream order, then those without an end, lost or in flight
    (`turnout.core.attempt_phases.Resolver`).

    Raises:
        StateUnavailable: Redis unreachable.
    """
    resolver = Resolver()
    async for row in rows:
        if (out := resolver.feed(row)) is not None:
            yield out
    for row in resolver.rest(now_s):
        yield row


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


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""Leading characters a spreadsheet reads as a formula (OWASP "CSV Injection")."""


def csv_cell(value: Any) -> Any:
    """One CSV cell, neutralised: a text starting with `= + - @`, a tab or a CR gets a leading `'`
    (OWASP's rule; the writer quotes the cell where its text needs it), so a tenant-chosen
    `=HYPERLINK(...)` opens as text; booleans `true`/`false`, None empty, numbers as they are."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_header() -> bytes:
    """The CSV header line."""
    return csv_lines([], header=True)


def csv_lines(rows: Iterable[dict[str, Any]], *, header: bool = False) -> bytes:
    """Rows as CSV (RFC 4180; each cell as `csv_cell`: formulas neutralised, booleans `true`/`false`, null as empty)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\r\n")
    if header:
        writer.writerow(FIELDS)
    for row in rows:
        out = _export_row(row)
        writer.writerow(csv_cell(v) for v in out.values())
    return buf.getvalue().encode()
