"""`Deadline`: the budget counted from arrival, and the policy's seconds accessors."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from turnout.core.deadline import Deadline
from turnout.core.policy import BudgetPolicy, Ceilings, FallbackPolicy, RetryPolicy


def test_deadline_counts_the_budget_from_arrival() -> None:
    deadline = Deadline.of(1000.0, BudgetPolicy(max_total_latency_ms=30_000))
    assert deadline.at_s == 1030.0
    assert deadline.left_s(1000.0) == 30.0
    assert deadline.left_s(1029.5) == 0.5
    assert deadline.left_s(1031.0) == -1.0


@given(
    arrived=st.floats(min_value=0, max_value=4e9),
    budget_ms=st.integers(min_value=1, max_value=10**7),
    spent=st.floats(min_value=0, max_value=1e5),
)
def test_deadline_time_left_only_shrinks(arrived: float, budget_ms: int, spent: float) -> None:
    deadline = Deadline.of(arrived, BudgetPolicy(max_total_latency_ms=budget_ms))
    assert deadline.left_s(arrived + spent) <= deadline.left_s(arrived) <= budget_ms / 1000 + 1e-6


def test_policy_seconds_accessors() -> None:
    retry = RetryPolicy(per_attempt_timeout_ms=1500, ttft_timeout_ms=250, stall_timeout_ms=0)
    assert retry.per_attempt_timeout_s == 1.5
    assert retry.ttft_timeout_s == 0.25
    assert retry.stall_timeout_s is None, "0 turns the stall watchdog off"
    assert RetryPolicy().ttft_timeout_s is None
    assert FallbackPolicy(backoff_ms=40).backoff_s == 0.04
    assert BudgetPolicy(max_total_latency_ms=180_000).max_total_latency_s == 180.0
    assert Ceilings(max_total_latency_ms=5000).max_total_latency_s == 5.0
