"""Attempt record phases: one row per attempt, and when an orphaned started row is lost (clock injected)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from turnout.core.attempt_phases import (
    IN_FLIGHT_KIND,
    LOST_KIND,
    LOST_MARGIN_S,
    UNBOUNDED_ATTEMPT_S,
    Phase,
    Resolver,
    as_lost,
    is_lost,
    lost_after_s,
    phase_of,
    resolve,
)

T0 = 1_700_000_000.0


def _started(aid: str, ts: float = T0, deadline: float | None = T0 + 20, run: int = 1) -> dict[str, Any]:
    return {
        "attempt_id": aid,
        "phase": "started",
        "ts": ts,
        "deadline_ts": deadline,
        "kind": IN_FLIGHT_KIND,
        "class": None,
        "status": None,
        "cost_usd": None,
        "attempt": 1,
        "run": run,
        "is_rerun": run > 1,
        "lost": False,
    }


def _ended(aid: str, ts: float = T0, kind: str = "success") -> dict[str, Any]:
    return {
        "attempt_id": aid,
        "phase": "ended",
        "ts": ts,
        "kind": kind,
        "class": "success",
        "status": 200,
        "cost_usd": 0.01,
        "attempt": 1,
        "run": 1,
        "is_rerun": False,
        "lost": False,
    }


def test_a_started_row_is_lost_only_past_its_deadline_plus_the_margin() -> None:
    row = _started("a", deadline=T0 + 20)
    assert lost_after_s(row) == T0 + 20 + LOST_MARGIN_S
    assert not is_lost(row, T0 + 20 + LOST_MARGIN_S)
    assert is_lost(row, T0 + 20 + LOST_MARGIN_S + 0.001)


def test_a_started_row_without_a_deadline_uses_the_unbounded_span() -> None:
    row = _started("a", deadline=None)
    assert lost_after_s(row) == T0 + UNBOUNDED_ATTEMPT_S + LOST_MARGIN_S


def test_a_lost_row_has_outcome_lost_and_unknown_cost() -> None:
    lost = as_lost(_started("a"))
    assert (lost["phase"], lost["kind"], lost["class"], lost["lost"]) == ("lost", LOST_KIND, LOST_KIND, True)
    assert lost["cost_usd"] is None and lost["status"] is None and lost["latency_ms"] is None
    assert lost["input_tokens"] is None and lost["output_tokens"] is None
    assert lost["attempt_id"] == "a" and lost["ts"] == T0


def test_rows_without_a_phase_are_ended_and_pass_through() -> None:
    legacy = {"request_id": "r", "attempt": 1, "kind": "success"}
    assert phase_of(legacy) is Phase.ENDED and phase_of({"phase": "bogus"}) is Phase.ENDED
    assert resolve([legacy, legacy], T0) == [legacy, legacy]


def test_an_ended_attempt_is_one_row_the_ended_one() -> None:
    assert resolve([_started("a"), _ended("a")], T0 + 10_000) == [_ended("a")]


def test_an_unended_attempt_is_in_flight_then_lost_as_the_clock_moves() -> None:
    rows = [_started("a", deadline=T0 + 20)]
    [shown] = resolve(rows, T0 + 5)
    assert shown["kind"] == IN_FLIGHT_KIND and shown["lost"] is False
    [later] = resolve(rows, T0 + 20 + LOST_MARGIN_S + 1)
    assert later["kind"] == LOST_KIND and later["lost"] is True and later["cost_usd"] is None


def test_a_written_lost_row_is_lost_at_once_and_an_end_still_wins() -> None:
    written = as_lost(_started("a"))
    [shown] = resolve([_started("a"), written], T0)
    assert shown["lost"] is True
    assert resolve([_started("a"), written, _ended("a")], T0) == [_ended("a")]


def test_the_resolver_keeps_ended_rows_in_stream_order_then_the_rest_oldest_first() -> None:
    resolver = Resolver()
    fed = [
        resolver.feed(r)
        for r in (_started("b", ts=T0 + 2), _started("a", ts=T0 + 1), _started("c", ts=T0 + 3), _ended("c", ts=T0 + 3))
    ]
    assert fed == [None, None, None, _ended("c", ts=T0 + 3)]
    assert [r["attempt_id"] for r in resolver.rest(T0)] == ["a", "b"]
    assert resolver.rest(T0) == []


_PHASE_ROWS = st.lists(
    st.tuples(st.sampled_from("abcd"), st.sampled_from(["started", "lost", "ended"])),
    max_size=12,
)


@given(_PHASE_ROWS, st.randoms(use_true_random=False))
def test_one_row_per_attempt_whatever_the_order(pairs: list[tuple[str, str]], rnd: Any) -> None:
    rows = []
    for aid, phase in pairs:
        row = _started(aid) if phase == "started" else as_lost(_started(aid)) if phase == "lost" else _ended(aid)
        rows.append(row)
    shuffled = rows[:]
    rnd.shuffle(shuffled)
    out = resolve(shuffled, T0 + 1)
    assert sorted(r["attempt_id"] for r in out) == sorted({aid for aid, _ in pairs})
    best = {aid: max((p for a, p in pairs if a == aid), key=["started", "lost", "ended"].index) for aid, _ in pairs}
    for row in out:
        expected = {"started": IN_FLIGHT_KIND, "lost": LOST_KIND, "ended": "success"}[best[row["attempt_id"]]]
        assert row["kind"] == expected
