"""The rules for a paid answer Redis did not take, and a claimed job's lease (`turnout.core.kept_answer`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from turnout.core.kept_answer import (
    KEEP_MAX_BYTES,
    KEEP_S,
    RETRY_MAX_S,
    RETRY_MIN_S,
    START_LEASE_S,
    ClaimClock,
    lease_ms,
    may_keep,
    retry_delay_s,
    still_kept,
)

counts = st.integers(min_value=0, max_value=10_000)
sizes = st.integers(min_value=0, max_value=2 * KEEP_MAX_BYTES)


@given(counts, sizes, sizes, st.integers(min_value=1, max_value=1_000))
def test_a_kept_answer_never_breaks_either_bound(kept: int, kept_bytes: int, size: int, max_answers: int) -> None:
    if may_keep(kept, kept_bytes, size, max_answers=max_answers):
        assert kept + 1 <= max_answers
        assert kept_bytes + size <= KEEP_MAX_BYTES


@given(st.integers(min_value=1, max_value=1_000), st.integers(min_value=0, max_value=KEEP_MAX_BYTES))
def test_the_first_answer_within_the_bytes_is_kept(max_answers: int, size: int) -> None:
    assert may_keep(0, 0, size, max_answers=max_answers)


@given(st.integers(min_value=-5, max_value=10_000))
def test_retries_wait_between_the_floor_and_the_cap_and_never_less_after_more_failures(failures: int) -> None:
    delay = retry_delay_s(failures)
    assert RETRY_MIN_S <= delay <= RETRY_MAX_S
    assert retry_delay_s(failures + 1) >= delay


@given(st.floats(min_value=0, max_value=1e6), st.floats(min_value=0, max_value=1e4))
def test_an_answer_is_kept_exactly_keep_s(first: float, elapsed: float) -> None:
    assert still_kept(first, first + elapsed) == (elapsed < KEEP_S)


@given(st.booleans(), st.floats(min_value=0.1, max_value=600))
def test_an_unstarted_job_never_holds_a_lease_longer_than_a_started_one(started: bool, full: float) -> None:
    ms = lease_ms(started, full)
    assert ms <= int(full * 1000)
    assert lease_ms(False, full) <= lease_ms(True, full)
    if not started:
        assert ms <= int(START_LEASE_S * 1000)


@given(
    st.lists(st.tuples(st.integers(min_value=0, max_value=10**6), st.floats(min_value=0, max_value=10)), min_size=1),
    st.floats(min_value=0, max_value=100),
)
def test_a_claim_never_dates_after_its_reply_and_a_late_reply_dates_back(
    replies: list[tuple[int, float]], stall_s: float
) -> None:
    clock = ClaimClock()
    base = 1_000.0
    for redis_ms, delay_s in replies:  # replies read `delay_s` after Redis ran them (a fixed offset `base`)
        local = base + redis_ms / 1000 + delay_s
        assert clock.claimed_at_s(redis_ms, local) <= local
    redis_ms = replies[-1][0] + 1000
    fresh = base + redis_ms / 1000
    late = clock.claimed_at_s(redis_ms, fresh + stall_s)  # read after a stall
    assert late <= fresh + min(delay for _, delay in replies) + 1e-6
