"""A health read shipped with a job stands for the worker's own read only while fresh and complete.

`Breakers.reads.shipped_view` (issue: Performance — health travels with the job):
the ingress's read is used when the store's clock says it is at most
`STALE_AFTER_S` old and covers every subject the plan needs; the view is aged
by that much, so its admissions re-read exactly as a view read then would.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from turnout.core.breaker import CLOSED, BreakerSettings
from turnout.core.plan import RoutingSettings
from turnout.core.policy import Policy
from turnout.health import STALE_AFTER_S, Breakers, HealthView
from turnout.state.breaker_store import Loaded, MemoryBreakerStore, Speed, Versioned
from turnout.wire import JobPayload, payload_decoder, payload_encoder

T = "sim-a/model"
READ_AT = 1_700_000_000.0


class Clock:
    """Injected monotonic clock."""

    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def _breakers(clock: Clock) -> Breakers:
    return Breakers.over(MemoryBreakerStore(lambda: READ_AT), BreakerSettings(), clock=clock)


LOADED = Loaded(now_s=READ_AT, entries={T: Versioned(3, CLOSED)}, speeds={T: Speed(ttft_ms=12.0)})


@given(age_s=st.floats(min_value=0.0, max_value=STALE_AFTER_S - 1e-3))  # epoch-second floats: µs precision
def test_a_fresh_complete_read_stands_aged_by_the_store_clock(age_s: float) -> None:
    clock = Clock()
    view = _breakers(clock).reads.shipped_view([T], LOADED, READ_AT + age_s)
    assert view is not None
    assert view.entries == LOADED.entries and view.speeds == LOADED.speeds
    assert abs(view.age_s() - age_s) < 1e-6
    assert abs(view.store_now() - (READ_AT + age_s)) < 1e-6


@given(age_s=st.floats(min_value=STALE_AFTER_S + 1e-3, max_value=3600.0))
def test_a_read_older_than_the_staleness_bound_is_read_again(age_s: float) -> None:
    assert _breakers(Clock()).reads.shipped_view([T], LOADED, READ_AT + age_s) is None


def test_a_read_missing_a_subject_the_plan_needs_is_read_again() -> None:
    assert _breakers(Clock()).reads.shipped_view([T, "sim-b/model"], LOADED, READ_AT) is None


def test_a_store_clock_behind_the_read_counts_as_age_zero() -> None:
    view = _breakers(Clock()).reads.shipped_view([T], LOADED, READ_AT - 2.0)
    assert view is not None and view.age_s() == 0.0


def test_a_degraded_view_ships_nothing_and_a_read_ships_round_trip_through_the_payload() -> None:
    assert HealthView(LOADED, degraded=True).loaded() is None
    shipped = HealthView(LOADED).loaded()
    payload = JobPayload(
        request_id="r",
        body=b"{}",
        org="o",
        squad=None,
        key="k",
        policy=Policy(),
        settings=RoutingSettings(),
        deadline_epoch_s=READ_AT + 60,
        reply_to="c",
        health=shipped,
    )
    assert payload_decoder.decode(payload_encoder.encode(payload)).health == LOADED
