"""Admission from stale views (`turnout.health.gate`, `reads`; SPEC §5)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from support.breakers import (
    CRED,
    SETTINGS,
    CountingStore,
    FakeTime,
    Fleet,
    ManualSleep,
    T,
    U,
)
from turnout.core.breaker import (
    CLOSED,
)
from turnout.core.loop import SkipReason
from turnout.core.types import FailureKind
from turnout.health import (
    RAMP_RETRY_S,
    STALE_AFTER_S,
    Gate,
    HealthView,
)
from turnout.state.breaker_store import Loaded

# ------------------------------------------------------------------ stale views


async def test_breakers_stale_view_is_read_again_before_admission(fleet: Fleet) -> None:
    old = await fleet.view()
    await fleet.trip()  # tripped by someone else after `old` was read

    fresh_enough = HealthView(Loaded(now_s=old.now_s, entries=dict(old.entries)), clock=fleet.time.monotonic)
    fleet.time.advance(STALE_AFTER_S)
    assert (await fleet.breakers.gate.admit(T, fresh_enough)).admitted, "a fresh view is trusted as read"

    fleet.time.advance(0.1)
    gate = await fleet.breakers.gate.admit(T, old)
    assert not gate.admitted
    assert gate.reopen_in_s == pytest.approx(SETTINGS.cooldown_s - STALE_AFTER_S - 0.1)
    assert old.entries[T].snapshot.open
    assert old.age_s() == 0.0 and old.now_s == fleet.time.epoch


async def test_breakers_stale_view_sees_the_cooldown_end(fleet: Fleet) -> None:
    await fleet.trip()
    view = await fleet.view()
    fleet.time.advance(SETTINGS.cooldown_s)
    assert (await fleet.breakers.gate.admit(T, view)).probe


async def test_breakers_fresh_view_extrapolates_the_store_clock(fleet: Fleet) -> None:
    await fleet.trip()
    view = await fleet.view()
    fleet.time.advance(STALE_AFTER_S)  # still fresh: not read again
    assert view.store_now() == fleet.time.epoch
    gate = await fleet.breakers.gate.admit(T, view)
    assert gate.reopen_in_s == pytest.approx(SETTINGS.cooldown_s - STALE_AFTER_S)


async def test_breakers_probe_is_not_admitted_from_a_view_read_before_a_failed_probe(fleet: Fleet) -> None:
    """Two workers read HALF_OPEN; the first probes and fails (reopens, releases the
    permit) before the second admits from its still-fresh view. The second must not
    send another probe into the new cooldown (SPEC §5: one probe per half-open)."""
    await fleet.trip_and_cool()
    view_b = await fleet.view()
    view_a, gate_a = await fleet.probe()
    await fleet.breakers.results.record(
        T, FailureKind.SERVER_ERROR, probe_token=gate_a.probe_token, error="x", view=view_a
    )

    gate = await fleet.breakers.gate.admit(T, view_b)
    assert gate == Gate(admitted=False, reopen_in_s=2 * SETTINGS.cooldown_s, reason=SkipReason.CIRCUIT_OPEN)
    assert await fleet.permit_free(), "the permit taken to check was given back"
    assert fleet.sleeper.held == [], "no renewal left running"


async def test_breakers_view_read_before_a_successful_probe_admits_without_probe(fleet: Fleet) -> None:
    await fleet.trip_and_cool()
    view_b = await fleet.view()
    view_a, gate_a = await fleet.probe()
    await fleet.breakers.results.record(T, FailureKind.SUCCESS, probe_token=gate_a.probe_token, error="", view=view_a)

    gate = await fleet.breakers.gate.admit(T, view_b)
    assert not gate.probe, "B is not a probe of a closed breaker"
    assert gate == Gate(admitted=False, reopen_in_s=RAMP_RETRY_S, reason=SkipReason.RAMPING)  # slow start
    assert await fleet.permit_free(), "the permit taken to check was given back"


class LoadRecordingStore(CountingStore):
    """A memory store that remembers the subjects of every load."""

    def __init__(self, time: FakeTime) -> None:
        super().__init__(time)
        self.loads: list[list[str]] = []

    async def load(self, targets: Sequence[str], caps: Sequence[str] = ()) -> Loaded:
        self.loads.append(list(targets))
        return await super().load(targets, caps)


async def test_breakers_view_reads_targets_and_credentials_in_one_round_trip(
    time: FakeTime, sleeper: ManualSleep
) -> None:
    store = LoadRecordingStore(time)
    fleet = Fleet(time, sleeper, store=store)
    await fleet.trip()
    store.loads.clear()
    view = await fleet.breakers.reads.view([T, CRED, T, U])
    assert store.loads == [[T, CRED, U]]
    assert set(view.entries) == {T, CRED, U}
    assert view.snapshot(T).open and view.snapshot("nobody/none") == CLOSED
