"""Expected queue wait and shedding at the door (`turnout.core.queue_wait`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnout.core.queue_wait import (
    FleetCapacity,
    RecentServiceTimes,
    WorkerBeat,
    expected_wait_ms,
    fleet_capacity,
    jobs_ahead,
    max_jobs_ahead,
    shed_retry_after_s,
    sheds,
)

capacities = st.builds(FleetCapacity, slots=st.integers(1, 10_000), service_ms=st.floats(0.5, 600_000))
budgets = st.integers(0, 600_000)
depths = st.integers(0, 100_000)


def test_expected_wait_is_depth_times_service_time_over_slots() -> None:
    assert expected_wait_ms(10, FleetCapacity(slots=4, service_ms=1000)) == 2500


@given(capacities, depths, depths)
def test_expected_wait_is_monotone_in_depth(capacity: FleetCapacity, a: int, b: int) -> None:
    low, high = sorted((a, b))
    assert expected_wait_ms(low, capacity) <= expected_wait_ms(high, capacity)


@given(capacities, budgets, depths, depths)
def test_shedding_is_monotone_in_depth(capacity: FleetCapacity, budget_ms: int, a: int, b: int) -> None:
    low, high = sorted((a, b))
    assert not sheds(low, budget_ms, capacity) or sheds(high, budget_ms, capacity)  # more ahead never admits


@given(st.one_of(st.none(), capacities), budgets)
def test_an_empty_queue_is_never_shed(capacity: FleetCapacity | None, budget_ms: int) -> None:
    assert not sheds(0, budget_ms, capacity)
    assert jobs_ahead(0, []) == 0


@given(capacities, budgets, st.integers(0, 5000))
def test_the_limit_handed_to_the_enqueue_script_matches_sheds_exactly(
    capacity: FleetCapacity, budget_ms: int, ahead: int
) -> None:
    assert sheds(ahead, budget_ms, capacity) == (ahead > max_jobs_ahead(budget_ms, capacity))


def test_without_a_capacity_estimate_nothing_is_shed_and_the_script_gets_no_limit() -> None:
    assert not sheds(10**6, 1, None)
    assert max_jobs_ahead(1000, None) == -1


def test_a_budget_of_2_s_on_4_slots_of_1_s_jobs_admits_3_ahead() -> None:
    capacity = FleetCapacity(slots=4, service_ms=1000)
    assert max_jobs_ahead(2000, capacity) == 3  # 0.75 s of waiting, 1 s of service, within 90 % of 2 s
    assert not sheds(3, 2000, capacity)
    assert sheds(4, 2000, capacity)


def test_a_budget_shorter_than_one_service_time_admits_only_an_empty_queue() -> None:
    capacity = FleetCapacity(slots=4, service_ms=1000)
    assert max_jobs_ahead(500, capacity) == 0
    assert sheds(1, 500, capacity)


@given(capacities, budgets, st.integers(1, 100_000))
def test_retry_after_is_at_least_one_second_and_covers_the_excess(
    capacity: FleetCapacity, budget_ms: int, ahead: int
) -> None:
    retry_s = shed_retry_after_s(ahead, budget_ms, capacity)
    assert retry_s >= 1
    assert retry_s * 1000 >= expected_wait_ms(ahead, capacity) + capacity.service_ms - budget_ms


def test_retry_after_rounds_the_excess_up() -> None:
    assert shed_retry_after_s(18, 2000, FleetCapacity(slots=4, service_ms=1000)) == 4  # 4.5 + 1 s, 1.8 s usable


@pytest.mark.parametrize(
    ("own", "others", "ahead"),
    [
        (0, [], 0),
        (0, [50, 50], 2),  # a new org waits one job per org on the ring, not their backlogs
        (3, [50, 1], 3 + 4 + 1),
        (10, [2, 0], 12),
    ],
)
def test_jobs_ahead_under_the_fair_ring(own: int, others: list[int], ahead: int) -> None:
    assert jobs_ahead(own, others) == ahead


@given(st.integers(0, 1000), st.lists(st.integers(0, 1000), max_size=20))
def test_jobs_ahead_is_at_least_the_own_backlog_and_at_most_everything_waiting(own: int, others: list[int]) -> None:
    assert own <= jobs_ahead(own, others) <= own + sum(others)


def test_fleet_capacity_ignores_stale_beats_and_weights_service_time_by_slots() -> None:
    now = 1_000_000
    beats = [
        WorkerBeat(slots=4, service_ms=1000, expires_ms=now + 1),
        WorkerBeat(slots=2, service_ms=4000, expires_ms=now + 1),
        WorkerBeat(slots=100, service_ms=1, expires_ms=now),  # gone
        WorkerBeat(slots=2, service_ms=0, expires_ms=now + 1),  # has not served a job yet: slots count, time not
    ]
    assert fleet_capacity(beats, now) == FleetCapacity(slots=8, service_ms=2000)


def test_fleet_capacity_is_unknown_until_a_live_worker_has_served_a_job() -> None:
    assert fleet_capacity([], 0) is None
    assert fleet_capacity([WorkerBeat(slots=4, service_ms=0, expires_ms=10)], 0) is None
    assert fleet_capacity([WorkerBeat(slots=4, service_ms=10, expires_ms=10)], 10) is None


def test_recent_service_times_keep_a_window() -> None:
    times = RecentServiceTimes(window=3)
    assert times.mean_ms() == 0
    for ms in (100, 200, 300, 400):
        times.add(ms)
    assert times.mean_ms() == 300
