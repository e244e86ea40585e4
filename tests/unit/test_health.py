"""`Breakers` over `MemoryBreakerStore` with a fake clock (SPEC §5).

Views extrapolate the store clock with the real `time.monotonic()`, so waits
past a cooldown add a small margin (`EPS`) instead of freezing monotonic time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from turnout.core.breaker import CLOSED, BreakerSettings, BreakerSnapshot, BreakerState, Counted
from turnout.core.classify import COUNTS_AGAINST_HEALTH
from turnout.core.types import FailureKind
from turnout.errors import GatewayUnavailable
from turnout.health import STALE_AFTER_S, Breakers, Gate, HealthView, counted_of
from turnout.state.breaker_store import Loaded, MemoryBreakerStore, Versioned

T = "acme/model-a"
U = "other/model-b"
EPS = 0.01
SETTINGS = BreakerSettings()  # 3 consecutive failures, cooldown 30 s doubling to 300 s

Transition = tuple[str, BreakerState, BreakerState]


class FakeClock:
    """Epoch seconds that move only when told."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Fleet:
    """A memory store, its clock, `Breakers` over it and the transitions it reported."""

    def __init__(self, settings: BreakerSettings = SETTINGS) -> None:
        self.clock = FakeClock()
        self.store = MemoryBreakerStore(self.clock)
        self.transitions: list[Transition] = []
        self.breakers = Breakers(self.store, settings, on_transition=self._on_transition)

    def _on_transition(self, target: str, old: BreakerState, new: BreakerState) -> None:
        self.transitions.append((target, old, new))

    async def fail(self, n: int, kind: FailureKind = FailureKind.SERVER_ERROR, target: str = T) -> None:
        for i in range(n):
            view = await self.breakers.view([target])
            await self.breakers.record(target, kind, probe_token=None, error=f"HTTP 503 #{i}", view=view)

    async def admit(self, target: str = T) -> Gate:
        return await self.breakers.admit(target, await self.breakers.view([target]))

    async def snapshot(self, target: str = T) -> BreakerSnapshot:
        return (await self.store.load([target])).entries[target].snapshot

    async def trip_and_cool(self) -> None:
        """Open the breaker, then let its first cooldown pass (HALF_OPEN)."""
        await self.fail(3)
        self.clock.advance(SETTINGS.cooldown_s + EPS)


@pytest.fixture
def fleet() -> Fleet:
    return Fleet()


# ------------------------------------------------------------------ counted_of


@pytest.mark.parametrize("kind", list(FailureKind), ids=lambda k: k.value)
def test_counted_of_every_failure_kind(kind: FailureKind) -> None:
    expected = (
        Counted.SUCCESS if kind is FailureKind.SUCCESS
        else Counted.FAILURE if kind in COUNTS_AGAINST_HEALTH
        else Counted.NEUTRAL
    )
    assert counted_of(kind) is expected


# ------------------------------------------------------------------ admission


async def test_breakers_admit_when_closed(fleet: Fleet) -> None:
    assert await fleet.admit() == Gate(admitted=True)
    await fleet.fail(2)
    assert await fleet.admit() == Gate(admitted=True)
    assert fleet.transitions == []


async def test_breakers_three_counted_failures_reject_for_the_cooldown(fleet: Fleet) -> None:
    await fleet.fail(3)
    gate = await fleet.admit()
    assert not gate.admitted and not gate.probe
    assert gate.reopen_in_s == pytest.approx(SETTINGS.cooldown_s, abs=0.05)
    fleet.clock.advance(20.0)
    gate = await fleet.admit()
    assert not gate.admitted
    assert gate.reopen_in_s == pytest.approx(10.0, abs=0.05)
    assert fleet.transitions == [(T, BreakerState.CLOSED, BreakerState.OPEN)]
    assert (await fleet.snapshot()).last_error == "HTTP 503 #2"


async def test_breakers_recording_view_sees_its_own_trip(fleet: Fleet) -> None:
    view = await fleet.breakers.view([T])
    for _ in range(3):
        await fleet.breakers.record(T, FailureKind.TIMEOUT, probe_token=None, error="timeout", view=view)
    assert view.entries[T].version == 3
    assert not (await fleet.breakers.admit(T, view)).admitted


async def test_breakers_half_open_admits_exactly_one_of_many_concurrent_probes(fleet: Fleet) -> None:
    await fleet.trip_and_cool()
    views = [await fleet.breakers.view([T]) for _ in range(10)]
    gates = await asyncio.gather(*(fleet.breakers.admit(T, v) for v in views))
    probes = [g for g in gates if g.admitted]
    assert len(probes) == 1
    assert probes[0].admitted and probes[0].probe and probes[0].reopen_in_s is None
    assert all(g == Gate(admitted=False, reopen_in_s=1.0) for g in gates if not g.admitted)


async def test_breakers_half_open_probe_success_closes(fleet: Fleet) -> None:
    await fleet.trip_and_cool()
    view = await fleet.breakers.view([T])
    gate = await fleet.breakers.admit(T, view)
    assert gate.probe
    await fleet.breakers.record(T, FailureKind.SUCCESS, probe_token=gate.probe_token, error="", view=view)

    assert await fleet.snapshot() == BreakerSnapshot(window="1")
    assert await fleet.admit() == Gate(admitted=True)
    assert fleet.transitions == [
        (T, BreakerState.CLOSED, BreakerState.OPEN),
        (T, BreakerState.HALF_OPEN, BreakerState.CLOSED),
    ]
    # Trips were reset: the next trip cools down for the base 30 s again.
    await fleet.fail(3)
    assert (await fleet.snapshot()).cooldown_s == SETTINGS.cooldown_s


async def test_breakers_half_open_probe_failure_reopens_with_doubled_cooldown(fleet: Fleet) -> None:
    await fleet.trip_and_cool()
    for expected_cooldown in [60.0, 120.0, 240.0, 300.0, 300.0]:
        view = await fleet.breakers.view([T])
        gate = await fleet.breakers.admit(T, view)
        assert gate.probe
        await fleet.breakers.record(
            T, FailureKind.SERVER_ERROR, probe_token=gate.probe_token, error="HTTP 500", view=view
        )
        snap = await fleet.snapshot()
        assert (snap.open, snap.cooldown_s) == (True, expected_cooldown)
        gate = await fleet.admit()
        assert not gate.admitted
        assert gate.reopen_in_s == pytest.approx(expected_cooldown, abs=0.05)
        fleet.clock.advance(expected_cooldown + EPS)
    assert fleet.transitions == [(T, BreakerState.CLOSED, BreakerState.OPEN)] + [
        (T, BreakerState.HALF_OPEN, BreakerState.OPEN)
    ] * 5


async def test_breakers_non_probe_results_while_open_do_not_close_or_reopen(fleet: Fleet) -> None:
    view = await fleet.breakers.view([T])  # admitted before the trip
    await fleet.fail(3)
    await fleet.breakers.record(T, FailureKind.SUCCESS, probe_token=None, error="", view=view)
    snap = await fleet.snapshot()
    assert snap.open and snap.trips == 1
    assert snap.window == "0001"
    assert fleet.transitions == [(T, BreakerState.CLOSED, BreakerState.OPEN)]


async def test_breakers_targets_are_independent(fleet: Fleet) -> None:
    await fleet.fail(3, target=T)
    view = await fleet.breakers.view([T, U])
    assert not (await fleet.breakers.admit(T, view)).admitted
    assert (await fleet.breakers.admit(U, view)).admitted


# ------------------------------------------------------------------ never-counted kinds

NEUTRAL_KINDS = [
    FailureKind.CLIENT_ERROR, FailureKind.AUTH, FailureKind.CANCELLED, FailureKind.NO_CREDENTIAL,
    FailureKind.CONTEXT_LENGTH, FailureKind.CONTENT_POLICY,
]


@pytest.mark.parametrize("kind", NEUTRAL_KINDS, ids=lambda k: k.value)
async def test_breakers_neutral_kinds_never_count(fleet: Fleet, kind: FailureKind) -> None:
    await fleet.fail(10, kind=kind)
    entry = (await fleet.store.load([T])).entries[T]
    assert entry == Versioned(0, CLOSED)
    assert await fleet.admit() == Gate(admitted=True)
    # ...nor break a run of counted failures.
    await fleet.fail(2)
    await fleet.fail(5, kind=kind)
    await fleet.fail(1)
    assert not (await fleet.admit()).admitted


@pytest.mark.parametrize("kind", NEUTRAL_KINDS, ids=lambda k: k.value)
async def test_breakers_record_releases_the_probe_even_for_neutral(fleet: Fleet, kind: FailureKind) -> None:
    await fleet.trip_and_cool()
    view = await fleet.breakers.view([T])
    gate = await fleet.breakers.admit(T, view)
    assert gate.probe
    assert not (await fleet.admit()).admitted  # permit held
    await fleet.breakers.record(T, kind, probe_token=gate.probe_token, error="", view=view)
    # Nothing counted: still HALF_OPEN, and the permit is free for the next probe.
    assert (await fleet.snapshot()).trips == 1
    assert (await fleet.admit()).probe


async def test_breakers_record_releases_the_probe_on_success_and_failure(fleet: Fleet) -> None:
    await fleet.trip_and_cool()
    view = await fleet.breakers.view([T])
    gate = await fleet.breakers.admit(T, view)
    assert gate.probe
    await fleet.breakers.record(T, FailureKind.SERVER_ERROR, probe_token=gate.probe_token, error="", view=view)
    assert await fleet.store.acquire_probe(T, 1.0) is not None, "probe permit not released after a failed probe"


@pytest.mark.parametrize(
    "kind", [FailureKind.SUCCESS, FailureKind.SERVER_ERROR, FailureKind.CANCELLED], ids=lambda k: k.value
)
async def test_breakers_probe_that_outlived_its_permit_does_not_free_the_next_holders(
    fleet: Fleet, kind: FailureKind
) -> None:
    """Probe A hangs past its permit's TTL; B takes a new permit. When A finally
    records, it must give back only its own (expired) permit, not B's."""
    await fleet.trip_and_cool()
    view_a = await fleet.breakers.view([T])
    gate_a = await fleet.breakers.admit(T, view_a)
    assert gate_a.probe
    fleet.clock.advance(SETTINGS.probe_ttl_s + EPS)  # A's permit expires

    view_b = await fleet.breakers.view([T])
    gate_b = await fleet.breakers.admit(T, view_b)
    assert gate_b.admitted and gate_b.probe
    assert gate_b.probe_token != gate_a.probe_token

    await fleet.breakers.record(T, kind, probe_token=gate_a.probe_token, error="late", view=view_a)
    assert await fleet.store.acquire_probe(T, 1.0) is None, "the old probe freed the newer holder's permit"
    if kind is FailureKind.CANCELLED:  # still HALF_OPEN: no second probe while B runs
        assert await fleet.admit() == Gate(admitted=False, reopen_in_s=1.0)

    await fleet.breakers.record(T, FailureKind.CANCELLED, probe_token=gate_b.probe_token, error="", view=view_b)
    assert await fleet.store.acquire_probe(T, 1.0) is not None, "the holder's own release frees the permit"


# ------------------------------------------------------------------ stale views


async def test_breakers_stale_view_is_read_again_before_admission(fleet: Fleet) -> None:
    old = await fleet.breakers.view([T])
    await fleet.fail(3)  # tripped by someone else after `old` was read

    fresh_enough = HealthView(Loaded(now_s=old.now_s, entries=dict(old.entries)))
    assert (await fleet.breakers.admit(T, fresh_enough)).admitted, "a fresh view is trusted as read"

    old.read_at = time.monotonic() - STALE_AFTER_S - 0.1
    gate = await fleet.breakers.admit(T, old)
    assert not gate.admitted
    assert gate.reopen_in_s == pytest.approx(SETTINGS.cooldown_s, abs=0.05)
    assert old.entries[T].snapshot.open
    assert time.monotonic() - old.read_at < STALE_AFTER_S


async def test_breakers_stale_view_sees_the_cooldown_end(fleet: Fleet) -> None:
    await fleet.fail(3)
    view = await fleet.breakers.view([T])
    fleet.clock.advance(SETTINGS.cooldown_s + EPS)
    view.read_at = time.monotonic() - STALE_AFTER_S - 0.1
    assert (await fleet.breakers.admit(T, view)).probe


async def test_breakers_probe_is_not_admitted_from_a_view_read_before_a_failed_probe(fleet: Fleet) -> None:
    """Two workers read HALF_OPEN; the first probes and fails (reopens, releases the
    permit) before the second admits from its still-fresh view. The second must not
    send another probe into the new cooldown (SPEC §5: one probe per half-open)."""
    await fleet.trip_and_cool()
    view_a = await fleet.breakers.view([T])
    view_b = await fleet.breakers.view([T])
    gate_a = await fleet.breakers.admit(T, view_a)
    assert gate_a.probe
    await fleet.breakers.record(T, FailureKind.SERVER_ERROR, probe_token=gate_a.probe_token, error="HTTP 500", view=view_a)

    gate = await fleet.breakers.admit(T, view_b)
    assert not gate.admitted
    assert gate.reopen_in_s == pytest.approx(60.0, abs=0.05)
    assert await fleet.store.acquire_probe(T, 1.0) is not None, "the permit taken to check was given back"


async def test_breakers_view_read_before_a_successful_probe_admits_without_probe(fleet: Fleet) -> None:
    await fleet.trip_and_cool()
    view_a = await fleet.breakers.view([T])
    view_b = await fleet.breakers.view([T])
    gate_a = await fleet.breakers.admit(T, view_a)
    assert gate_a.probe
    await fleet.breakers.record(T, FailureKind.SUCCESS, probe_token=gate_a.probe_token, error="", view=view_a)

    assert await fleet.breakers.admit(T, view_b) == Gate(admitted=True)
    assert await fleet.store.acquire_probe(T, 1.0) is not None, "the permit taken to check was given back"


# ------------------------------------------------------------------ HealthView.all_open


def _view(snapshots: dict[str, BreakerSnapshot], now_s: float = 1000.0) -> HealthView:
    return HealthView(Loaded(now_s=now_s, entries={t: Versioned(1, s) for t, s in snapshots.items()}))


def _opened(at: float, cooldown: float = 30.0) -> BreakerSnapshot:
    return BreakerSnapshot(open=True, trips=1, opened_at_s=at, cooldown_s=cooldown, window="000")


ALL_OPEN_CASES = [
    ({T: _opened(990.0), U: _opened(995.0)}, [T, U], 20.0),
    ({T: _opened(990.0), U: _opened(999.0, cooldown=5.0)}, [T, U], 4.0),
    ({T: _opened(990.0)}, [T], 20.0),
    ({T: _opened(990.0), U: _opened(900.0)}, [T, U], None),  # U is HALF_OPEN
    ({T: _opened(990.0), U: BreakerSnapshot(window="0")}, [T, U], None),  # U is CLOSED
    ({T: _opened(990.0)}, [T, U], None),  # U unknown: CLOSED
    ({T: _opened(990.0)}, [], None),
    ({T: _opened(970.0)}, [T], None),  # exactly at the cooldown's end: HALF_OPEN
]


@pytest.mark.parametrize(
    ("snapshots", "targets", "expected"),
    ALL_OPEN_CASES,
    ids=["all-open-min", "all-open-shorter-cooldown", "one-open", "one-half-open", "one-closed",
         "one-unknown", "no-targets", "boundary-half-open"],
)
def test_health_view_all_open(
    snapshots: dict[str, BreakerSnapshot], targets: Sequence[str], expected: float | None
) -> None:
    view = _view(snapshots)
    view.read_at = time.monotonic()  # no extrapolation beyond rounding
    result = view.all_open(targets)
    if expected is None:
        assert result is None
    else:
        assert result == pytest.approx(expected, abs=0.05)


def test_health_view_success_rates_only_for_targets_with_history() -> None:
    view = _view({T: BreakerSnapshot(window="1101"), U: CLOSED})
    assert view.success_rates() == {T: 0.75}


# ------------------------------------------------------------------ outage policy


class DownStore:
    """A store whose every call fails like an unreachable Redis."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def _down(self, name: str) -> RedisConnectionError:
        self.calls.append(name)
        return RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    async def load(self, targets: Sequence[str]) -> Loaded:
        raise self._down("load")

    async def compare_and_set(self, target: str, version: int, snapshot: BreakerSnapshot) -> Loaded | None:
        raise self._down("compare_and_set")

    async def acquire_probe(self, target: str, ttl_s: float) -> str | None:
        raise self._down("acquire_probe")

    async def release_probe(self, target: str, token: str) -> None:
        raise self._down("release_probe")


async def test_breakers_outage_closed_policy_admits_and_reads_degraded(caplog: pytest.LogCaptureFixture) -> None:
    store = DownStore()
    breakers = Breakers(store, SETTINGS, on_store_error="closed")
    with caplog.at_level(logging.WARNING, logger="turnout.breaker"):
        view = await breakers.view([T, U])
    assert view.degraded
    assert view.entries == {}
    assert view.all_open([T, U]) is None
    assert await breakers.admit(T, view) == Gate(admitted=True)
    for _ in range(5):
        await breakers.record(T, FailureKind.SERVER_ERROR, probe_token=None, error="x", view=view)
    assert store.calls == ["load"], "a degraded view records nothing"
    assert "on_store_error=closed" in caplog.text


async def test_breakers_outage_fail_policy_refuses_with_redis_unavailable() -> None:
    breakers = Breakers(DownStore(), SETTINGS, on_store_error="fail")
    with pytest.raises(GatewayUnavailable) as info:
        await breakers.view([T])
    assert info.value.code == "redis_unavailable"
    assert info.value.retry_after_s >= 1
    assert isinstance(info.value.__cause__, RedisConnectionError)


class FlakyStore(MemoryBreakerStore):
    """A memory store that goes down when told (Redis lost mid-request)."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        super().__init__(self.clock)
        self.down = False

    async def load(self, targets: Sequence[str]) -> Loaded:
        if self.down:
            raise RedisConnectionError("connection lost")
        return await super().load(targets)

    async def compare_and_set(self, target: str, version: int, snapshot: BreakerSnapshot) -> Loaded | None:
        if self.down:
            raise RedisConnectionError("connection lost")
        return await super().compare_and_set(target, version, snapshot)

    async def acquire_probe(self, target: str, ttl_s: float) -> str | None:
        if self.down:
            raise RedisConnectionError("connection lost")
        return await super().acquire_probe(target, ttl_s)

    async def release_probe(self, target: str, token: str) -> None:
        if self.down:
            raise RedisConnectionError("connection lost")
        await super().release_probe(target, token)


@pytest.mark.parametrize("policy", ["closed", "fail"])
@pytest.mark.parametrize("probe", [False, True], ids=["plain", "probe"])
async def test_breakers_outage_during_record_never_raises(policy: str, probe: bool) -> None:
    """The attempt already ran: losing Redis afterwards must not turn its result
    (maybe a served answer, maybe a cancellation) into a 503."""
    store = FlakyStore()
    breakers = Breakers(store, SETTINGS, on_store_error=policy)  # type: ignore[arg-type]
    view = await breakers.view([T])
    token = await store.acquire_probe(T, SETTINGS.probe_ttl_s) if probe else None
    store.down = True
    await breakers.record(T, FailureKind.SUCCESS, probe_token=token, error="", view=view)
    await breakers.record(T, FailureKind.SERVER_ERROR, probe_token=token, error="x", view=view)
    await breakers.record(T, FailureKind.CANCELLED, probe_token=token, error="", view=view)


async def test_breakers_outage_closed_policy_admits_when_the_probe_permit_is_unreachable() -> None:
    store = FlakyStore()
    breakers = Breakers(store, SETTINGS, on_store_error="closed")
    view = await breakers.view([T])
    for _ in range(3):
        await breakers.record(T, FailureKind.SERVER_ERROR, probe_token=None, error="x", view=view)
    store.clock.advance(SETTINGS.cooldown_s + EPS)
    view = await breakers.view([T])
    store.down = True
    assert await breakers.admit(T, view) == Gate(admitted=True)


async def test_breakers_outage_fail_policy_refuses_a_stale_reread() -> None:
    store = FlakyStore()
    breakers = Breakers(store, SETTINGS, on_store_error="fail")
    view = await breakers.view([T])
    view.read_at = time.monotonic() - STALE_AFTER_S - 0.1
    store.down = True
    with pytest.raises(GatewayUnavailable) as info:
        await breakers.admit(T, view)
    assert info.value.code == "redis_unavailable"


# ------------------------------------------------------------------ CAS retries


class AlwaysConflicting(MemoryBreakerStore):
    """Every write loses a race."""

    def __init__(self) -> None:
        super().__init__(FakeClock())
        self.writes = 0

    async def compare_and_set(self, target: str, version: int, snapshot: BreakerSnapshot) -> Loaded | None:
        self.writes += 1
        return Loaded(now_s=self._clock(), entries={target: Versioned(version + 1, CLOSED)})


async def test_breakers_record_gives_up_after_bounded_conflicts(caplog: pytest.LogCaptureFixture) -> None:
    store = AlwaysConflicting()
    breakers = Breakers(store, SETTINGS)
    view = await breakers.view([T])
    with caplog.at_level(logging.ERROR, logger="turnout.breaker"):
        await breakers.record(T, FailureKind.SERVER_ERROR, probe_token=None, error="x", view=view)
    assert store.writes == 100
    assert "not recorded" in caplog.text


async def test_breakers_record_recomputes_from_the_current_entry_on_conflict(fleet: Fleet) -> None:
    stale = await fleet.breakers.view([T])
    await fleet.fail(2)
    await fleet.breakers.record(T, FailureKind.SERVER_ERROR, probe_token=None, error="third", view=stale)
    snap = await fleet.snapshot()
    assert snap.open, "the third failure must count on top of the two stored ones"
    assert stale.entries[T].version == 3


class LosesRedisAfterTheProbePermit(MemoryBreakerStore):
    """The permit is taken, then the store goes away before the re-read."""

    def __init__(self) -> None:
        super().__init__(FakeClock())
        self.down = False

    async def acquire_probe(self, target: str, ttl_s: float) -> str | None:
        token = await super().acquire_probe(target, ttl_s)
        self.down = True
        return token

    async def load(self, targets: Sequence[str]) -> Loaded:
        if self.down:
            raise RedisConnectionError("connection lost")
        return await super().load(targets)


async def test_breakers_outage_after_taking_the_permit_admits_as_the_probe() -> None:
    store = LosesRedisAfterTheProbePermit()
    breakers = Breakers(store, SETTINGS, on_store_error="closed")
    await store.compare_and_set(T, 0, BreakerSnapshot(open=True, trips=1, opened_at_s=0.0, cooldown_s=30.0))
    view = await breakers.view([T])
    # The permit is held, so the attempt is the probe: record() gives the permit back.
    gate = await breakers.admit(T, view)
    assert gate.admitted and gate.probe and gate.reopen_in_s is None
    assert await store.acquire_probe(T, 30.0) is None, "the gate holds the permit"
