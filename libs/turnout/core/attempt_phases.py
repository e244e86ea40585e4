"""The phases of an attempt record (SPEC §9) and the rule that calls an orphan lost.

Owns: the pure part of records that survive a kill. An attempt writes a
`started` row when it is dispatched (before the upstream call can bill) and
an `ended` row with the same `attempt_id` when it ends. A row whose attempt
never ended (its worker died) becomes `lost`: written so by the job's re-run
when it starts, or judged so by any reader once the attempt's deadline plus
`LOST_MARGIN_S` has passed with no end. A lost attempt's outcome is `lost`,
its tokens and cost unknown (null), and it carries `lost: true`.
`resolve` / `Resolver` collapse a request's rows into one row per attempt.
No I/O, no clock: `now_s` (epoch seconds) is passed in.
Must not import: anything outside the standard library.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

Row = dict[str, Any]


class Phase(enum.StrEnum):
    """Where an attempt's stored row stands (`phase` of a stored row)."""

    STARTED = "started"  # dispatched; the upstream call may be under way
    ENDED = "ended"  # finished with an outcome (rows written before phases existed count as ended)
    LOST = "lost"  # its process died before it ended


LOST_KIND = "lost"
"""`kind` and `class` of a lost attempt."""

IN_FLIGHT_KIND = "in_flight"
"""`kind` of a started attempt that may still be running."""

LOST_MARGIN_S = 30.0
"""Seconds past an attempt's deadline before a reader calls it lost: covers
the end row's flush delay and clock skew between writers (seconds)."""

UNBOUNDED_ATTEMPT_S = 900.0
"""For a started row without `deadline_ts`: seconds after its `ts` taken as its deadline."""

_RANK = {Phase.STARTED: 0, Phase.LOST: 1, Phase.ENDED: 2}


def phase_of(row: Row) -> Phase:
    """The row's phase; a row without one (written before phases) is `ended`."""
    try:
        return Phase(row.get("phase") or Phase.ENDED)
    except ValueError:
        return Phase.ENDED


def lost_after_s(row: Row) -> float:
    """Epoch seconds after which a started row with no end is lost.

    The attempt's deadline (`deadline_ts`, the client's deadline when the
    attempt started; else `ts + UNBOUNDED_ATTEMPT_S`) plus `LOST_MARGIN_S`.
    """
    deadline = row.get("deadline_ts")
    base = float(deadline) if deadline else float(row.get("ts") or 0.0) + UNBOUNDED_ATTEMPT_S
    return base + LOST_MARGIN_S


def is_lost(row: Row, now_s: float) -> bool:
    """True when `row` (a started row with no end) is past `lost_after_s` at `now_s`."""
    return now_s > lost_after_s(row)


def as_lost(row: Row) -> Row:
    """The lost row of a started row: outcome `lost`, status, latency, tokens and cost unknown."""
    return {
        **row,
        "phase": str(Phase.LOST),
        "kind": LOST_KIND,
        "class": LOST_KIND,
        "status": None,
        "latency_ms": None,
        "input_tokens": None,
        "output_tokens": None,
        "cost_usd": None,
        "lost": True,
    }


def as_in_flight(row: Row) -> Row:
    """A started row as readers show it while its attempt may still run."""
    return {**row, "kind": IN_FLIGHT_KIND, "lost": False}


class Resolver:
    """Collapses rows into one per attempt: an `ended` row wins over a `lost`
    one, which wins over `started`, whatever order they come in.

    `feed` returns an ended row (or a row without `attempt_id`) at once, and
    None for one it holds or has already passed; `rest` returns what is held,
    oldest `ts` first: lost rows as they are, started rows as lost once
    `is_lost`, else as in flight. Holds one row per attempt not yet ended.
    """

    def __init__(self) -> None:
        self._open: dict[str, Row] = {}
        self._ended: set[str] = set()

    def feed(self, row: Row) -> Row | None:
        """See the class docstring."""
        attempt_id = row.get("attempt_id")
        if not attempt_id:
            return row
        if attempt_id in self._ended:
            return None
        phase = phase_of(row)
        if phase is Phase.ENDED:
            self._open.pop(attempt_id, None)
            self._ended.add(attempt_id)
            return row
        held = self._open.get(attempt_id)
        if held is None or _RANK[phase] > _RANK[phase_of(held)]:
            self._open[attempt_id] = row
        return None

    def rest(self, now_s: float) -> list[Row]:
        """The attempts seen without an end, as of `now_s` (epoch s), oldest first."""
        out: list[Row] = []
        for row in sorted(self._open.values(), key=lambda r: float(r.get("ts") or 0.0)):
            if phase_of(row) is Phase.LOST:
                out.append(as_lost(row))
            else:
                out.append(as_lost(row) if is_lost(row, now_s) else as_in_flight(row))
        self._open.clear()
        return out


def resolve(rows: Iterable[Row], now_s: float) -> list[Row]:
    """One row per attempt of `rows` (any order) as of `now_s`: ended rows in
    their order, then the unended ones (see `Resolver`)."""
    resolver = Resolver()
    out = [r for r in (resolver.feed(row) for row in rows) if r is not None]
    return out + resolver.rest(now_s)
