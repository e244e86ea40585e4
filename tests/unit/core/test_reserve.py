"""Budgets as ceilings: the reservation arithmetic of `turnout.core.reserve` (issue #40)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from turnout.core.limits import WINDOW_MS, Bucket, drained
from turnout.core.reserve import (
    charged,
    completion_bound,
    fits,
    micro_usd_down,
    micro_usd_up,
    prompt_tokens,
    worst_case_usd,
)

_prices = st.lists(st.tuples(st.floats(0, 100), st.floats(0, 100)), max_size=5)


def test_completion_bound_prefers_the_request_then_the_ceiling_then_the_default() -> None:
    assert completion_bound(50, 100, 4096) == 50
    assert completion_bound(None, 100, 4096) == 100
    assert completion_bound(None, None, 4096) == 4096


def test_worst_case_is_the_dearest_offer_at_the_whole_completion_times_n() -> None:
    prices = [(1.0, 2.0), (3.0, 1.0)]  # USD per million tokens
    assert worst_case_usd(1_000, 500, 2, prices) == max(1_000 * 1 + 1_000 * 2, 1_000 * 3 + 1_000 * 1) / 1e6
    assert worst_case_usd(1_000, 500, 1, []) == 0.0
    assert prompt_tokens(9) == 3 and prompt_tokens(0) == 0


@given(st.integers(0, 10**6), st.integers(0, 10**5), st.integers(1, 8), _prices)
def test_worst_case_covers_every_offer_of_the_plan(
    prompt: int, completion: int, n: int, prices: list[tuple[float, float]]
) -> None:
    worst = worst_case_usd(prompt, completion, n, prices)
    for i, o in prices:
        assert worst >= (prompt * i + completion * n * o) / 1e6
    assert micro_usd_up(worst) >= worst * 1e6 - 1e-3


@given(st.floats(0, 1e6))
def test_rounding_never_undercounts_a_reservation_nor_grows_a_budget(usd: float) -> None:
    assert micro_usd_down(usd) <= micro_usd_up(usd)
    assert micro_usd_down(usd) <= usd * 1e6 + 1e-3
    assert micro_usd_up(usd) >= usd * 1e6 - 1e-3


@given(
    budget=st.integers(0, 10**7),
    steps=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 100), st.booleans()), max_size=80),
)
def test_admitting_by_fits_never_lets_spent_and_held_pass_the_budget(
    budget: int, steps: list[tuple[int, int, bool]]
) -> None:
    """Any interleaving of admissions and settlements (actual ≤ worst): spend + held ≤ budget."""
    spent = 0
    held: list[tuple[int, int]] = []  # (worst, actual)
    for worst, share, settle in steps:
        if settle and held:
            _, actual = held.pop(0)
            spent += actual
        elif fits(budget, spent, sum(w for w, _ in held), worst):
            held.append((worst, worst * share // 100))
        assert spent + sum(w for w, _ in held) <= budget
    assert spent <= budget


@given(
    limit=st.integers(1, 10_000),
    level=st.integers(0, 10**9),
    estimate=st.integers(0, 10**5),
    used=st.integers(0, 10**6),
    later_ms=st.integers(0, 10 * WINDOW_MS),
)
def test_tpm_debt_carries_into_the_next_window_and_drains_at_the_limit(
    limit: int, level: int, estimate: int, used: int, later_ms: int
) -> None:
    after = charged(level, estimate, used, WINDOW_MS)
    assert after == max(0, level + (used - estimate) * WINDOW_MS)
    left = drained(Bucket(level=after, at_ms=0), limit, later_ms)
    assert left == max(0, after - later_ms * limit)  # a debt is not forgotten after one window


def test_reported_tokens_reads_every_surfaces_usage() -> None:
    from turnout.core.reserve import reported_tokens

    assert reported_tokens({"usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}}) == 12
    assert reported_tokens({"usage": {"input_tokens": 5, "output_tokens": 7, "cache_read_input_tokens": 3}}) == 15
    assert reported_tokens({"usageMetadata": {"totalTokenCount": 9}}) == 9
    assert reported_tokens({"usage": None}) is None
    assert reported_tokens({"choices": []}) is None
    assert reported_tokens({"usage": {"total_tokens": -1}}) == 0
