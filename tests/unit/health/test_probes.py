"""The HALF_OPEN probe and its fleet-wide permit, renewed while it runs (`turnout.health.probes`, `gate`; SPEC §5)."""

from __future__ import annotations

import asyncio
import logging
import math

import pytest

from support.breakers import (
    CIRCUIT_OPEN_PROBE_IN_FLIGHT,
    FRESH_RUN,
    NEUTRAL_KINDS,
    RENEW_EVERY_S,
    SETTINGS,
    FakeTime,
    FlakyStore,
    Fleet,
    ManualSleep,
    T,
)
from turnout.core.breaker import (
    BreakerState,
    counts,
    score,
)
from turnout.core.loop import SkipReason
from turnout.core.types import FailureKind
from turnout.health import (
    MAX_PROBE_HOLD_S,
    Gate,
)

# ------------------------------------------------------------------ half-open and the probe


async def test_breakers_half_open_admits_exactly_one_probe_fleet_wide(fleet: Fleet) -> None:
    await fleet.trip_and_cool()
    processes = [fleet.breakers, *(fleet.process() for _ in range(4))]
    views = [await p.reads.view([T]) for p in processes for _ in range(5)]
    gates = await asyncio.gather(*(processes[i // 5].gate.admit(T, v) for i, v in enumerate(views)))
    probes = [g for g in gates if g.admitted]
    assert len(probes) == 1
    assert probes[0].probe and probes[0].reopen_in_s is None and probes[0].reason is None
    assert [g for g in gates if not g.admitted] == [CIRCUIT_OPEN_PROBE_IN_FLIGHT] * (len(views) - 1)


async def test_breakers_half_open_probe_success_closes_with_slow_start(fleet: Fleet) -> None:
    await fleet.trip_and_cool()
    view, gate = await fleet.probe()
    await fleet.breakers.results.record(T, FailureKind.SUCCESS, probe_token=gate.probe_token, error="", view=view)

    snap = await fleet.snapshot()
    now = fleet.time.epoch
    assert (snap.open, snap.trips, snap.closed_at_s) == (False, 0, now)
    assert counts(snap, now, SETTINGS) == (1.0, 0.0), "the outage's counts are cleared"
    assert score(snap, now, SETTINGS) == 1.0
    assert (snap.trip_rule, snap.last_error) == ("run", f"HTTP 503 #{FRESH_RUN - 1}")
    gates = [await fleet.admit() for _ in range(10)]  # slow start: 10 % of the attempts right after the close
    assert sum(g.admitted for g in gates) == 1
    assert fleet.transitions == [
        (T, BreakerState.CLOSED, BreakerState.OPEN),
        (T, BreakerState.HALF_OPEN, BreakerState.CLOSED),
    ]
    # Trips were reset: the next trip cools down for the base cooldown again.
    for _ in range(100):
        await fleet.fail(1)
        if (await fleet.snapshot()).open:
            break
    snap = await fleet.snapshot()
    assert (snap.open, snap.trips, snap.cooldown_s) == (True, 1, SETTINGS.cooldown_s)


async def test_breakers_half_open_probe_failure_reopens_with_doubled_capped_cooldown(fleet: Fleet) -> None:
    await fleet.trip_and_cool()
    expected = [10.0, 20.0, 20.0, 20.0]
    assert expected[1] == SETTINGS.max_cooldown_s
    for trips, cooldown in enumerate(expected, start=2):
        view, gate = await fleet.probe()
        await fleet.breakers.results.record(
            T, FailureKind.SERVER_ERROR, probe_token=gate.probe_token, error="HTTP 500", view=view
        )
        snap = await fleet.snapshot()
        assert (snap.open, snap.trips, snap.cooldown_s, snap.trip_rule) == (True, trips, cooldown, "probe")
        assert await fleet.admit() == Gate(admitted=False, reopen_in_s=cooldown, reason=SkipReason.CIRCUIT_OPEN)
        fleet.time.advance(cooldown)
    assert fleet.transitions == [(T, BreakerState.CLOSED, BreakerState.OPEN)] + [
        (T, BreakerState.HALF_OPEN, BreakerState.OPEN)
    ] * len(expected)
    assert fleet.trips == [(T, "run", False)] + [(T, "probe", False)] * len(expected)


async def test_breakers_provider_healed_after_a_long_outage_is_back_within_30_s(fleet: Fleet) -> None:
    await fleet.trip_and_cool()
    for _ in range(10):  # a long outage: every probe fails
        view, gate = await fleet.probe()
        await fleet.breakers.results.record(T, FailureKind.TRANSPORT, probe_token=gate.probe_token, error="", view=view)
        fleet.time.advance((await fleet.snapshot()).cooldown_s)
    # The provider heals right after the last failed probe: the next probe comes
    # within the capped cooldown, and its success closes the breaker.
    view, gate = await fleet.probe()
    await fleet.breakers.results.record(T, FailureKind.TRANSPORT, probe_token=gate.probe_token, error="", view=view)
    healed_at = fleet.time.epoch
    gate = await fleet.admit()
    assert gate.reopen_in_s is not None and gate.reopen_in_s <= 30.0
    fleet.time.advance(gate.reopen_in_s)
    view, gate = await fleet.probe()
    await fleet.breakers.results.record(T, FailureKind.SUCCESS, probe_token=gate.probe_token, error="", view=view)
    assert not (await fleet.snapshot()).open
    assert fleet.time.epoch - healed_at <= 30.0


@pytest.mark.parametrize("kind", NEUTRAL_KINDS, ids=lambda k: k.value)
async def test_breakers_record_releases_the_probe_even_for_neutral(fleet: Fleet, kind: FailureKind) -> None:
    await fleet.trip_and_cool()
    view, gate = await fleet.probe()
    assert await fleet.admit() == CIRCUIT_OPEN_PROBE_IN_FLIGHT  # permit held
    await fleet.breakers.results.record(T, kind, probe_token=gate.probe_token, error="", view=view)
    # Nothing counted: still HALF_OPEN, and the permit is free for the next probe.
    assert (await fleet.snapshot()).trips == 1
    assert fleet.sleeper.held == [], "the renewal stopped"
    assert (await fleet.admit()).probe


@pytest.mark.parametrize("kind", [FailureKind.SUCCESS, FailureKind.SERVER_ERROR], ids=lambda k: k.value)
async def test_breakers_record_releases_the_probe_on_success_and_failure(fleet: Fleet, kind: FailureKind) -> None:
    await fleet.trip_and_cool()
    view, gate = await fleet.probe()
    await fleet.breakers.results.record(T, kind, probe_token=gate.probe_token, error="", view=view)
    assert fleet.sleeper.held == [], "the renewal stopped"
    assert await fleet.permit_free(), "probe permit not released"


@pytest.mark.parametrize(
    "kind", [FailureKind.SUCCESS, FailureKind.SERVER_ERROR, FailureKind.CANCELLED], ids=lambda k: k.value
)
async def test_breakers_probe_that_outlived_its_permit_does_not_free_the_next_holders(
    fleet: Fleet, kind: FailureKind
) -> None:
    """Probe A's process stalls (its permit is not renewed) past the permit's TTL;
    B takes a new permit. When A finally records, it gives back only its own
    (expired) permit, not B's."""
    await fleet.trip_and_cool()
    view_a, gate_a = await fleet.probe()
    fleet.time.advance(SETTINGS.probe_ttl_s)  # no renewal ran: A's permit expires

    view_b, gate_b = await fleet.probe()
    assert gate_b.probe_token != gate_a.probe_token

    await fleet.breakers.results.record(T, kind, probe_token=gate_a.probe_token, error="late", view=view_a)
    assert not await fleet.permit_free(), "the old probe freed the newer holder's permit"
    if kind is FailureKind.CANCELLED:  # still HALF_OPEN: no second probe while B runs
        assert await fleet.admit() == CIRCUIT_OPEN_PROBE_IN_FLIGHT

    await fleet.breakers.results.record(T, FailureKind.CANCELLED, probe_token=gate_b.probe_token, error="", view=view_b)
    assert await fleet.permit_free(), "the holder's own release frees the permit"


# ------------------------------------------------------------------ probe permit renewal


async def test_breakers_probe_permit_is_renewed_while_the_probe_runs_past_its_ttl(fleet: Fleet) -> None:
    await fleet.trip_and_cool()
    view_a, gate_a = await fleet.probe()
    assert fleet.sleeper.held_delays() == [RENEW_EVERY_S], "renewed every third of the TTL"
    other = fleet.process()
    started = fleet.time.epoch

    for _ in range(9):  # three TTLs
        await fleet.sleeper.tick()
        assert await other.gate.admit(T, await other.reads.view([T])) == CIRCUIT_OPEN_PROBE_IN_FLIGHT
        assert not await fleet.permit_free()
    assert fleet.time.epoch - started >= 3 * SETTINGS.probe_ttl_s - 1e-6
    assert fleet.store.renewals == [(gate_a.probe_token, True)] * 9
    assert fleet.sleeper.delays == [RENEW_EVERY_S] * 10

    await fleet.breakers.results.record(T, FailureKind.SUCCESS, probe_token=gate_a.probe_token, error="", view=view_a)
    assert fleet.sleeper.held == [], "the renewal stopped with the release"
    assert not (await fleet.snapshot()).open
    assert await fleet.permit_free()


async def test_breakers_probe_permit_frees_itself_a_ttl_after_its_holder_dies(fleet: Fleet) -> None:
    await fleet.trip_and_cool()
    _, gate_a = await fleet.probe()
    for _ in range(4):
        await fleet.sleeper.tick()
    # A's process dies: no renewal runs any more (nor a release).
    fleet.time.advance(SETTINGS.probe_ttl_s - 0.01)
    assert await fleet.admit() == CIRCUIT_OPEN_PROBE_IN_FLIGHT
    fleet.time.advance(0.02)
    _, gate_b = await fleet.probe()
    assert gate_b.probe_token != gate_a.probe_token


async def test_breakers_probe_renewal_stops_once_the_permit_is_lost(fleet: Fleet) -> None:
    await fleet.trip_and_cool()
    view_a, gate_a = await fleet.probe()
    fleet.time.advance(SETTINGS.probe_ttl_s)  # A stalled: its permit expired
    _, gate_b = await fleet.probe()
    assert len(fleet.sleeper.held) == 2

    await fleet.sleeper.tick()
    assert sorted(fleet.store.renewals) == sorted([(gate_a.probe_token, False), (gate_b.probe_token, True)])
    assert len(fleet.sleeper.held) == 1, "A's renewal gave up; B's goes on"
    await fleet.sleeper.tick()
    assert fleet.store.renewals[-1] == (gate_b.probe_token, True)
    await fleet.breakers.results.record(T, FailureKind.CANCELLED, probe_token=gate_a.probe_token, error="", view=view_a)
    assert not await fleet.permit_free()


async def test_breakers_probe_renewal_survives_a_store_outage(
    time: FakeTime, sleeper: ManualSleep, caplog: pytest.LogCaptureFixture
) -> None:
    store = FlakyStore(time)
    fleet = Fleet(time, sleeper, store=store, on_store_error="fail")
    await fleet.trip_and_cool()
    _, gate = await fleet.probe()
    store.down = True
    with caplog.at_level(logging.WARNING, logger="turnout.breaker"):
        await sleeper.tick()  # the renewal fails: logged, never raised, tried again
    assert "breaker store unreachable" in caplog.text
    assert len(sleeper.held) == 1
    store.down = False
    await sleeper.tick()
    assert store.renewals == [(gate.probe_token, True)]
    time.advance(SETTINGS.probe_ttl_s - 2 * RENEW_EVERY_S + 1.0)  # past the first TTL
    assert not await fleet.permit_free()


async def test_breakers_probe_permit_renewal_ends_after_the_hold_cap(fleet: Fleet) -> None:
    """A lost release (a bug, a leaked gate) must not hold the permit for ever."""
    await fleet.trip_and_cool()
    await fleet.probe()
    started = fleet.time.mono
    ticks = 0
    while fleet.sleeper.held:
        await fleet.sleeper.tick()
        ticks += 1
        assert ticks <= math.ceil(MAX_PROBE_HOLD_S / RENEW_EVERY_S) + 1
    assert fleet.time.mono - started >= MAX_PROBE_HOLD_S - 1e-6
    fleet.time.advance(SETTINGS.probe_ttl_s)
    assert await fleet.permit_free()
