"""The latest snapshots a process has seen are a bounded least-recently-noted cache (issue #40: tenant-chosen
model names are breaker subjects; `turnout.health.seen`)."""

from __future__ import annotations

from turnout.core.breaker import CLOSED
from turnout.health.seen import KNOWN_MAX, UNKNOWN, LatestSeen
from turnout.state.breaker_store import Versioned


def test_a_new_subject_past_the_cap_forgets_the_one_noted_longest_ago() -> None:
    seen = LatestSeen(capacity=3)
    for i, subject in enumerate(("a", "b", "c")):
        seen.note(subject, Versioned(1, CLOSED), float(i))
    seen.note("a", Versioned(1, CLOSED), 0.0)  # noted again (an older sighting): kept, and now the newest
    seen.note("d", Versioned(1, CLOSED), 4.0)
    assert len(seen) == 3
    assert seen.latest("b") == UNKNOWN  # the least recently noted went
    assert seen.latest("a") == Versioned(1, CLOSED) and seen.latest("d") == Versioned(1, CLOSED)


def test_the_later_sighting_still_wins_and_none_is_ignored() -> None:
    seen = LatestSeen(capacity=2)
    seen.note("t", Versioned(5, CLOSED), 10.0)
    seen.note("t", Versioned(3, CLOSED), 9.0)  # seen earlier: not kept
    seen.note("t", None, 11.0)
    assert seen.latest("t").version == 5
    assert seen.seen_since("t", Versioned(4, CLOSED), 9.5) == Versioned(5, CLOSED)


def test_ten_thousand_subjects_keep_at_most_the_cap() -> None:
    seen = LatestSeen()
    for i in range(KNOWN_MAX + 10_000):
        seen.note(f"custom:beta:ep/tenant-model-{i}", Versioned(1, CLOSED), float(i))
    assert len(seen) == KNOWN_MAX
