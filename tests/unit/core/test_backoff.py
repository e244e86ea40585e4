"""Table tests for turnout.core.backoff (SPEC §3 "Backoff": full jitter, Retry-After)."""

from __future__ import annotations

import random

import pytest

from turnout.core.backoff import DelaySource, RetryDelay, full_jitter_s, retry_delay
from turnout.core.policy import RetryPolicy

SEEDS = range(200)


class MaxRandom(random.Random):
    """`uniform(a, b)` always returns `b`: the top of the jitter range."""

    def uniform(self, a: float, b: float) -> float:
        return b


# --------------------------------------------------------------------- full jitter


@pytest.mark.parametrize("n", range(11), ids=[f"retry-{n}" for n in range(11)])
@pytest.mark.parametrize(
    ("base_ms", "max_ms"),
    [(250, 8000), (1000, 30_000), (250, 250), (60_000, 60_000)],
    ids=["defaults", "base-1s-max-30s", "max-equals-base", "base-at-range-top"],
)
def test_full_jitter_stays_within_the_cap_for_every_seed(n: int, base_ms: int, max_ms: int) -> None:
    cap_s = min(max_ms, base_ms * 2**n) / 1000.0
    delays = [full_jitter_s(n, base_ms, max_ms, random.Random(seed)) for seed in SEEDS]
    assert all(0.0 <= d <= cap_s for d in delays)
    # Full jitter spreads over the whole range, not a narrow band near the cap.
    assert min(delays) < cap_s * 0.1
    assert max(delays) > cap_s * 0.9


@pytest.mark.parametrize(
    ("n", "expected_cap_s"),
    [(0, 0.25), (1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 8.0), (6, 8.0), (10, 8.0), (1000, 8.0)],
    ids=["n0", "n1", "n2", "n3", "n4", "n5-reaches-max", "n6-capped", "n10-capped", "n1000-no-overflow"],
)
def test_full_jitter_cap_doubles_until_max_ms(n: int, expected_cap_s: float) -> None:
    assert full_jitter_s(n, 250, 8000, MaxRandom()) == pytest.approx(expected_cap_s)


def test_full_jitter_negative_retry_number_counts_as_zero() -> None:
    assert full_jitter_s(-3, 250, 8000, MaxRandom()) == pytest.approx(0.25)


@pytest.mark.parametrize(
    ("base_ms", "effective_base_ms"),
    [(1, 250), (-100, 250), (249, 250), (250, 250), (61_000, 60_000), (10**9, 60_000)],
    ids=["one", "negative", "just-below", "at-floor", "above-range", "huge"],
)
def test_full_jitter_clamps_base_ms_to_250_through_60000(base_ms: int, effective_base_ms: int) -> None:
    big_max_ms = 10**9
    assert full_jitter_s(0, base_ms, big_max_ms, MaxRandom()) == pytest.approx(effective_base_ms / 1000.0)


@pytest.mark.parametrize("n", [0, 1, 5, 1000])
def test_a_base_ms_of_zero_is_no_backoff_at_all(n: int) -> None:
    assert full_jitter_s(n, 0, 8000, MaxRandom()) == 0.0


@pytest.mark.parametrize("max_ms", [0, -5], ids=["zero", "negative"])
def test_full_jitter_non_positive_max_ms_means_no_wait(max_ms: int) -> None:
    assert full_jitter_s(3, 250, max_ms, random.Random(1)) == 0.0


@pytest.mark.parametrize("seed", [0, 1, 42, 2**31], ids=["seed-0", "seed-1", "seed-42", "seed-2^31"])
def test_full_jitter_is_deterministic_for_a_seed(seed: int) -> None:
    a = [full_jitter_s(n, 250, 8000, random.Random(seed)) for n in range(8)]
    b = [full_jitter_s(n, 250, 8000, random.Random(seed)) for n in range(8)]
    assert a == b


def test_full_jitter_differs_between_seeds() -> None:
    assert len({full_jitter_s(3, 250, 8000, random.Random(seed)) for seed in range(20)}) == 20


# --------------------------------------------------------------------- retry_delay


POLICY = RetryPolicy()  # max_ms 8000, respect_retry_after


@pytest.mark.parametrize(
    ("hint_s", "time_left_s", "expected"),
    [
        (2.0, 100.0, RetryDelay(delay_s=2.0, source=DelaySource.RETRY_AFTER)),
        (0.0, 100.0, RetryDelay(delay_s=0.0, source=DelaySource.RETRY_AFTER)),
        (0.35, 100.0, RetryDelay(delay_s=0.35, source=DelaySource.RETRY_AFTER)),
        (8.0, 100.0, RetryDelay(delay_s=8.0, source=DelaySource.RETRY_AFTER)),
        (8.001, 100.0, RetryDelay(delay_s=0.0, source=DelaySource.RETRY_AFTER, fall_back_now=True)),
        (90.0, 100.0, RetryDelay(delay_s=0.0, source=DelaySource.RETRY_AFTER, fall_back_now=True)),
        (3.0, 3.0, RetryDelay(delay_s=0.0, source=DelaySource.RETRY_AFTER, fall_back_now=True)),
        (3.0, 2.5, RetryDelay(delay_s=0.0, source=DelaySource.RETRY_AFTER, fall_back_now=True)),
        (3.0, 3.01, RetryDelay(delay_s=3.0, source=DelaySource.RETRY_AFTER)),
    ],
    ids=[
        "2s-replaces-delay",
        "zero-hint-retries-now",
        "sub-second",
        "at-max-ms-waits",
        "just-over-max-ms-falls-back",
        "90s-over-max-ms-falls-back",
        "equal-to-time-left-falls-back",
        "over-time-left-falls-back",
        "just-under-time-left-waits",
    ],
)
def test_retry_delay_with_a_retry_after_hint(hint_s: float, time_left_s: float, expected: RetryDelay) -> None:
    assert retry_delay(POLICY, 0, hint_s, time_left_s, random.Random(0)) == expected


@pytest.mark.parametrize("retry_number", [0, 3], ids=["first-retry", "fourth-retry"])
def test_retry_delay_hint_is_used_whatever_the_retry_number(retry_number: int) -> None:
    delay = retry_delay(POLICY, retry_number, 1.5, 60.0, random.Random(0))
    assert delay == RetryDelay(delay_s=1.5, source=DelaySource.RETRY_AFTER)


def test_retry_delay_hint_respects_a_larger_max_ms() -> None:
    policy = RetryPolicy(max_ms=120_000)
    assert retry_delay(policy, 0, 90.0, 100.0, random.Random(0)) == RetryDelay(
        delay_s=90.0, source=DelaySource.RETRY_AFTER
    )


@pytest.mark.parametrize(
    "hint_s", [None, 2.0, 90.0, -1.0], ids=["no-hint", "short-hint-ignored", "long-hint-ignored", "negative"]
)
def test_retry_delay_without_respect_retry_after_uses_full_jitter(hint_s: float | None) -> None:
    policy = RetryPolicy(respect_retry_after=False)
    delay = retry_delay(policy, 2, hint_s, 100.0, random.Random(7))
    assert delay.source is DelaySource.BACKOFF
    assert delay.fall_back_now is False
    assert delay.delay_s == full_jitter_s(2, 250, 8000, random.Random(7))


@pytest.mark.parametrize("hint_s", [None, -0.5], ids=["no-hint", "negative-hint-ignored"])
def test_retry_delay_with_no_usable_hint_uses_full_jitter(hint_s: float | None) -> None:
    delays = [retry_delay(POLICY, 1, hint_s, 100.0, random.Random(seed)) for seed in SEEDS]
    assert all(d.source is DelaySource.BACKOFF and not d.fall_back_now for d in delays)
    assert all(0.0 <= d.delay_s <= 0.5 for d in delays)


def test_retry_delay_jitter_does_not_itself_check_the_deadline() -> None:
    # The caller (the loop) checks that the retry starts before the deadline.
    delay = retry_delay(POLICY, 5, None, 0.001, MaxRandom())
    assert delay == RetryDelay(delay_s=8.0, source=DelaySource.BACKOFF)
