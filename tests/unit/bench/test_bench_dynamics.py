"""The pure reductions of the health-dynamics benchmark (bench/dynamics/calls.py)."""

from __future__ import annotations

import asyncio
import email.utils
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from dynamics.calls import (
    Call,
    max_in_flight,
    open_loop,
    peak_per_window,
    per_second,
    retry_hint_s,
    share,
    statuses,
)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # ms wins
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "-2"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
    ids=["ms-first", "seconds", "negative", "junk", "none"],
)
def test_retry_hint_s(headers: dict[str, str], expected: float | None) -> None:
    assert retry_hint_s(headers) == expected


def test_retry_hint_s_reads_an_http_date() -> None:
    now_s = 1_700_000_000.0
    hint = retry_hint_s({"retry-after": email.utils.formatdate(now_s + 30, usegmt=True)}, clock=lambda: now_s)
    assert hint == 30.0


def test_per_second_bins_from_start_and_drops_outside() -> None:
    assert per_second([9.9, 10.0, 10.5, 11.0, 12.999, 13.0], 10.0, 3) == [2, 1, 1]


def test_peak_per_window_slides_instead_of_binning() -> None:
    times = [0.5, 0.9, 1.1, 1.4, 3.0]
    assert per_second(times, 0.0, 4) == [2, 2, 0, 1]  # bins split the burst
    assert peak_per_window(times, 0.0, 10.0) == 4  # [0.5, 1.5) holds all four
    assert peak_per_window(times, 1.0, 10.0) == 2
    assert peak_per_window([], 0.0, 1.0) == 0


def _entry(t_s: float, ended_s: float | None) -> dict[str, object]:
    return {"t_s": t_s, "ended_s": ended_s}


def test_max_in_flight_counts_overlaps_open_entries_and_touching_ends() -> None:
    entries = [_entry(0.0, 1.0), _entry(1.0, 2.0), _entry(0.5, None), _entry(5.0, 6.0)]
    # [0,1] and [1,2] touch but do not overlap; the open one overlaps both.
    assert max_in_flight(entries, 0.0, 10.0) == 2
    assert max_in_flight(entries, 3.0, 10.0) == 2  # the open one and [5, 6]
    assert max_in_flight(entries, 3.0, 4.0) == 1
    assert max_in_flight([], 0.0, 1.0) == 0


def test_shares_and_status_counts() -> None:
    calls = [Call(0, 0, 200), Call(0, 0, 503), Call(0, 0, None), Call(0, 0, 200)]
    assert statuses(calls) == {"200": 2, "503": 1, "none": 1}
    assert share(1, 3) == 0.3333 and share(0, 0) is None


async def test_open_loop_sends_rate_times_duration_without_waiting_for_answers() -> None:
    sent = 0
    all_sent = asyncio.Event()

    async def answered_after_the_last_send() -> Call:
        nonlocal sent
        sent += 1
        if sent == 10:
            all_sent.set()
        await all_sent.wait()  # a loop that waited for this answer before sending on would never get here
        return Call(0.0, 0.0, 200)

    calls = await open_loop(answered_after_the_last_send, rate_per_s=50, run_s=0.2, grace_s=30)
    assert len(calls) == 10 and all(c.ok for c in calls)
