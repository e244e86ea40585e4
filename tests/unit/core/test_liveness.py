"""Whether a job's ingress is gone, and whether the job runs (`turnout.core.liveness`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from turnout.core.liveness import (
    BACK_GRACE_MS,
    CUT_GAP_MS,
    FORGET_AFTER_MS,
    forget,
    ingress_gone,
    lease_out,
    may_run,
    view_came_back,
)

ms = st.integers(min_value=0, max_value=10**13)
maybe_ms = st.none() | ms
listeners = st.integers(min_value=0, max_value=5)


@given(maybe_ms, ms, listeners)
def test_an_ingress_still_listening_or_within_its_lease_or_without_one_is_never_gone(
    until: int | None, now: int, heard: int
) -> None:
    gone = ingress_gone(until, now, heard)
    if until is None or now <= until or heard > 0:
        assert not gone
    else:
        assert gone


@given(maybe_ms, ms)
def test_a_lease_runs_out_only_after_its_end(until: int | None, now: int) -> None:
    assert lease_out(until, now) == (until is not None and now > until)


@given(st.booleans(), st.booleans())
def test_a_keyed_job_always_runs_and_an_unkeyed_one_only_while_its_ingress_is_there(keyed: bool, gone: bool) -> None:
    assert may_run(keyed, gone) == (keyed or not gone)
    assert may_run(True, gone)


@given(ms, st.integers(min_value=0, max_value=2 * FORGET_AFTER_MS))
def test_a_lease_is_forgotten_only_long_after_it_ran_out(until: int, past: int) -> None:
    assert forget(until, until + past) == (past > FORGET_AFTER_MS)


@given(maybe_ms, ms, listeners, maybe_ms)
def test_no_ingress_is_gone_within_the_grace_after_the_workers_view_came_back(
    until: int | None, now: int, heard: int, back: int | None
) -> None:
    """A failover or a restart cuts every process off Redis: leases lapse for all, and nobody listens
    until each resubscribes; within `BACK_GRACE_MS` of the worker's view coming back none is gone."""
    gone = ingress_gone(until, now, heard, back)
    if back is not None and now - back < BACK_GRACE_MS:
        assert not gone
    else:
        assert gone == ingress_gone(until, now, heard)


@given(st.booleans(), maybe_ms, ms)
def test_the_view_came_back_after_a_failed_read_or_a_long_gap(failed: bool, last_ok: int | None, now: int) -> None:
    back = view_came_back(failed, last_ok, now)
    assert back == (failed or (last_ok is not None and now - last_ok > CUT_GAP_MS))
    assert not view_came_back(False, now - CUT_GAP_MS, now), "reads a lease apart are no cut"
