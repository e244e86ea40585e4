"""`Breakers` over `MemoryBreakerStore` with injected time (SPEC §5).

Time is fake on both sides: the store's clock (epoch seconds) and the
process's monotonic clock (view ages, store-time extrapolation) move together
only when a test says so. The probe permit's renewal sleeps inside
`turnout.health` are held until the test ticks them (`ManualSleep`), so a
renewal happens exactly when a test lets it; shorter sleeps (the CAS backoff
jitter, at most 20 ms) return at once. Slow-start draws come from an RNG the
test sets.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Sequence

import msgspec
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from redis.exceptions import ConnectionError as RedisConnectionError

import turnout.health.probes
import turnout.health.writes
from turnout.core.breaker import (
    CLOSED,
    NOT_BEFORE_SLACK_S,
    Admission,
    BreakerSettings,
    BreakerSnapshot,
    BreakerState,
    admit,
    counts,
    ramp_share,
    run_needed,
    score,
    state_at,
)
from turnout.core.counting import count
from turnout.core.credentials import Credential
from turnout.core.loop import SkipReason
from turnout.core.ordering import Standing, TargetHealth
from turnout.core.types import FailureKind
from turnout.errors import GatewayUnavailable
from turnout.health import (
    MAX_PROBE_HOLD_S,
    RAMP_RETRY_S,
    STALE_AFTER_S,
    BreakerHooks,
    Breakers,
    Gate,
    HealthView,
    StoreErrorPolicy,
    credential_subject,
)
from turnout.state.breaker_store import Loaded, MemoryBreakerStore, Speed, SpeedSample, SpeedSamples, Versioned, samples
from turnout.state.errors import StateUnavailable, state_errors

T = "acme/model-a"
U = "other/model-b"
ORG = "org-1"
CRED = credential_subject(ORG, "acme")
SETTINGS = BreakerSettings()  # cooldown 5 s doubling to 20 s, probe TTL 10 s, slow start 10 s from 10 %
FRESH_RUN = run_needed(CLOSED, 0.0, SETTINGS, sole=False)
"""Failures in a row that open a target with no history (the run rule)."""
SOLE_RUN = run_needed(CLOSED, 0.0, SETTINGS, sole=True)
"""The same for a model's only target."""
RENEW_EVERY_S = SETTINGS.probe_ttl_s / 3

Transition = tuple[str, BreakerState, BreakerState]
_real_sleep = asyncio.sleep


# ------------------------------------------------------------------ fakes


def lost(message: str) -> StateUnavailable:
    """What a store raises when Redis is lost: `StateUnavailable` chained from redis-py's error."""
    try:
        with state_errors():
            raise RedisConnectionError(message)
    except StateUnavailable as exc:
        return exc
    raise AssertionError("state_errors did not map the error")


class FakeTime:
    """The store's clock (epoch seconds) and the process's monotonic clock,
    moving together only when told."""

    def __init__(self, epoch: float = 1_700_000_000.0, mono: float = 5_000.0) -> None:
        self.epoch = epoch
        self.mono = mono

    def store(self) -> float:
        return self.epoch

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.epoch += seconds
        self.mono += seconds


class ManualSleep:
    """`asyncio.sleep` as `turnout.health` sees it (installed by the `sleeper` fixture).

    Sleeps of `HELD_FROM_S` or more (the probe permit's renewal) wait until
    `tick()`; shorter ones (CAS backoff jitter) return at once. Every delay
    asked for is kept in `delays`.
    """

    HELD_FROM_S = 0.05

    def __init__(self, time: FakeTime) -> None:
        self.time = time
        self.delays: list[float] = []
        self.held: list[tuple[float, asyncio.Future[None]]] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        if delay < self.HELD_FROM_S:
            await _real_sleep(0)
            return
        entry = (delay, asyncio.get_running_loop().create_future())
        self.held.append(entry)
        try:
            await entry[1]
        finally:
            if entry in self.held:
                self.held.remove(entry)

    def held_delays(self) -> list[float]:
        return [d for d, _ in self.held]

    async def tick(self) -> None:
        """Time passes until the held sleeps end (the longest of them), then
        their tasks run until they sleep again or finish."""
        assert self.held, "nothing is sleeping"
        woken, self.held = self.held, []
        self.time.advance(max(d for d, _ in woken))
        for _, future in woken:
            future.set_result(None)
        await settle()


async def settle() -> None:
    """Let every ready task run until it blocks (the memory store never blocks)."""
    for _ in range(20):
        await _real_sleep(0)


class AsyncioWithSleep:
    """The `asyncio` module with another `sleep`, for `turnout.health` only."""

    def __init__(self, sleep: ManualSleep) -> None:
        self.sleep = sleep

    def __getattr__(self, name: str) -> object:
        return getattr(asyncio, name)


class SetDraw(random.Random):
    """An RNG whose uniform draw is what the test set (slow-start share, CAS jitter)."""

    def __init__(self, draw: float = 0.0) -> None:
        super().__init__(0)
        self.draw = draw

    def random(self) -> float:
        return self.draw


class CountingStore(MemoryBreakerStore):
    """A memory store that remembers every renewal and its answer."""

    def __init__(self, time: FakeTime) -> None:
        super().__init__(time.store)
        self.renewals: list[tuple[str, bool]] = []

    async def renew_probe(self, target: str, token: str, ttl_s: float) -> bool:
        assert ttl_s == SETTINGS.probe_ttl_s
        renewed = await super().renew_probe(target, token, ttl_s)
        self.renewals.append((token, renewed))
        return renewed


class FlakyStore(CountingStore):
    """A memory store that goes down when told (Redis lost mid-request)."""

    down = False

    def _check(self) -> None:
        if self.down:
            raise lost("connection lost")

    async def load(self, targets: Sequence[str], caps: Sequence[str] = ()) -> Loaded:
        self._check()
        return await super().load(targets, caps)

    async def compare_and_set(
        self, target: str, version: int, snapshot: BreakerSnapshot, speed: SpeedSamples = None, *, notify: bool = False
    ) -> Loaded | None:
        self._check()
        return await super().compare_and_set(target, version, snapshot, speed, notify=notify)

    async def acquire_probe(self, target: str, ttl_s: float) -> str | None:
        self._check()
        return await super().acquire_probe(target, ttl_s)

    async def release_probe(self, target: str, token: str) -> None:
        self._check()
        await super().release_probe(target, token)

    async def renew_probe(self, target: str, token: str, ttl_s: float) -> bool:
        self._check()
        return await super().renew_probe(target, token, ttl_s)


class Fleet:
    """A memory store, the time, `Breakers` over them and what their hooks reported."""

    def __init__(
        self,
        time: FakeTime,
        sleeper: ManualSleep,
        *,
        store: CountingStore | None = None,
        settings: BreakerSettings = SETTINGS,
        sole_targets: frozenset[str] = frozenset(),
        on_store_error: StoreErrorPolicy = "closed",
    ) -> None:
        self.time = time
        self.sleeper = sleeper
        self.store = store or CountingStore(time)
        self.settings = settings
        self.sole_targets = sole_targets
        self.on_store_error: StoreErrorPolicy = on_store_error
        self.rng = SetDraw()
        self.transitions: list[Transition] = []
        self.trips: list[tuple[str, str, bool]] = []
        self.alarms: list[str] = []
        self.breakers = self.process()

    def process(self) -> Breakers:
        """Another process's `Breakers` over the same store (same hooks, same RNG)."""
        return Breakers.over(
            self.store,
            self.settings,
            on_store_error=self.on_store_error,
            hooks=BreakerHooks(
                on_transition=lambda t, old, new: self.transitions.append((t, old, new)),
                on_alarm=self.alarms.append,
                on_trip=lambda t, rule, sole: self.trips.append((t, rule, sole)),
            ),
            sole_targets=self.sole_targets,
            clock=self.time.monotonic,
            rng=self.rng,
        )

    async def view(self, *subjects: str) -> HealthView:
        return await self.breakers.reads.view(subjects or [T])

    async def result(
        self,
        kind: FailureKind,
        target: str = T,
        *,
        error: str = "",
        retry_after_s: float | None = None,
        credential: Credential = Credential.SHARED,
        credential_key: str | None = None,
    ) -> None:
        """One attempt's result, recorded from a fresh view (no probe)."""
        view = await self.view(target, *([credential_key] if credential_key else []))
        await self.breakers.results.record(
            target,
            kind,
            probe_token=None,
            error=error,
            view=view,
            retry_after_s=retry_after_s,
            credential=credential,
            credential_key=credential_key,
        )
        await self.breakers.results.drain()  # a plain success returns before its write

    async def fail(self, n: int, kind: FailureKind = FailureKind.SERVER_ERROR, target: str = T) -> None:
        for i in range(n):
            await self.result(kind, target, error=f"HTTP 503 #{i}")

    async def succeed(self, n: int, target: str = T) -> None:
        for _ in range(n):
            await self.result(FailureKind.SUCCESS, target)

    async def admit(self, target: str = T) -> Gate:
        return await self.breakers.gate.admit(target, await self.view(target))

    async def snapshot(self, subject: str = T) -> BreakerSnapshot:
        return (await self.store.load([subject])).entries[subject].snapshot

    async def trip(self) -> None:
        """Open the breaker of a target with no history."""
        await self.fail(FRESH_RUN)
        assert (await self.snapshot()).open

    async def trip_and_cool(self) -> None:
        """Open the breaker, then let its first cooldown pass (HALF_OPEN)."""
        await self.trip()
        self.time.advance(SETTINGS.cooldown_s)

    async def probe(self, target: str = T) -> tuple[HealthView, Gate]:
        view = await self.view(target)
        gate = await self.breakers.gate.admit(target, view)
        assert gate.admitted and gate.probe, gate
        await settle()  # the permit's renewal starts and sleeps
        return view, gate

    async def permit_free(self, target: str = T) -> bool:
        """Whether the probe permit is free (taking it and giving it back)."""
        token = await self.store.acquire_probe(target, 1.0)
        if token is None:
            return False
        await self.store.release_probe(target, token)
        return True


@pytest.fixture
def time() -> FakeTime:
    return FakeTime()


@pytest.fixture
def sleeper(time: FakeTime, monkeypatch: pytest.MonkeyPatch) -> ManualSleep:
    manual = ManualSleep(time)
    monkeypatch.setattr(turnout.health.probes, "asyncio", AsyncioWithSleep(manual))  # the permit renewals
    monkeypatch.setattr(turnout.health.writes, "asyncio", AsyncioWithSleep(manual))  # the writes' backoff
    return manual


@pytest.fixture
def fleet(time: FakeTime, sleeper: ManualSleep) -> Fleet:
    return Fleet(time, sleeper)


CIRCUIT_OPEN_PROBE_IN_FLIGHT = Gate(admitted=False, reopen_in_s=RAMP_RETRY_S, reason=SkipReason.CIRCUIT_OPEN)


# ------------------------------------------------------------------ what counts where


@pytest.mark.parametrize("kind", list(FailureKind), ids=lambda k: k.value)
async def test_breakers_record_counts_each_failure_kind_of_the_platform_key_as_counting_says(
    fleet: Fleet, kind: FailureKind
) -> None:
    expected = count(kind, credential=Credential.SHARED, retry_after_s=None)
    await fleet.result(kind, error="x")
    entry = (await fleet.store.load([T])).entries[T]
    s, f = counts(entry.snapshot, fleet.time.epoch, SETTINGS)
    assert (s, f) == {"success": (1.0, 0.0), "failure": (0.0, 1.0), "neutral": (0.0, 0.0)}[expected.target]
    if expected.target == "neutral":
        assert entry == Versioned(0, CLOSED), "a result that counts nowhere writes nothing"
    assert fleet.alarms == ([T] if expected.alarm else [])


NEUTRAL_KINDS = [
    FailureKind.CLIENT_ERROR,
    FailureKind.AUTH,
    FailureKind.QUOTA_EXHAUSTED,
    FailureKind.CANCELLED,
    FailureKind.NO_CREDENTIAL,
    FailureKind.CONTEXT_LENGTH,
    FailureKind.CONTENT_POLICY,
]


@pytest.mark.parametrize("kind", NEUTRAL_KINDS, ids=lambda k: k.value)
async def test_breakers_neutral_kinds_never_count(fleet: Fleet, kind: FailureKind) -> None:
    await fleet.fail(10, kind=kind)
    assert (await fleet.store.load([T])).entries[T] == Versioned(0, CLOSED)
    assert await fleet.admit() == Gate(admitted=True)
    # ...nor break a run of counted failures.
    await fleet.fail(FRESH_RUN - 1)
    await fleet.fail(5, kind=kind)
    assert (await fleet.admit()).admitted
    await fleet.fail(1)
    assert not (await fleet.admit()).admitted


@pytest.mark.parametrize("kind", [FailureKind.AUTH, FailureKind.QUOTA_EXHAUSTED], ids=lambda k: k.value)
async def test_breakers_platform_key_rejected_is_an_alarm_not_a_failure(
    fleet: Fleet, kind: FailureKind, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="turnout.breaker"):
        await fleet.fail(FRESH_RUN * 2, kind=kind)
    assert fleet.alarms == [T] * (FRESH_RUN * 2)
    assert "operator action needed" in caplog.text
    assert (await fleet.store.load([T])).entries[T] == Versioned(0, CLOSED)
    assert await fleet.admit() == Gate(admitted=True)


@pytest.mark.parametrize("credential", [Credential.OWN, Credential.ENDPOINT], ids=lambda c: c.value)
@pytest.mark.parametrize("kind", [FailureKind.AUTH, FailureKind.QUOTA_EXHAUSTED], ids=lambda k: k.value)
async def test_breakers_tenant_key_failures_count_against_the_credential_only(
    fleet: Fleet, kind: FailureKind, credential: Credential
) -> None:
    for _ in range(FRESH_RUN):
        await fleet.result(kind, error="HTTP 401", credential=credential, credential_key=CRED)
    assert (await fleet.store.load([T])).entries[T] == Versioned(0, CLOSED), "the shared target is untouched"
    assert fleet.alarms == [], "a tenant's key is not the operator's alarm"
    cred = await fleet.snapshot(CRED)
    successes, failures = counts(cred, fleet.time.epoch, SETTINGS)
    assert successes == 0.0 and failures == pytest.approx(FRESH_RUN)
    assert cred.open and cred.last_error == "HTTP 401"

    view = await fleet.view(T, CRED)
    assert not await fleet.breakers.credentials.admits(CRED, view)
    assert await fleet.breakers.gate.admit(T, view) == Gate(admitted=True), "other tenants still use the target"
    assert await fleet.breakers.credentials.admits(credential_subject("org-2", "acme"), view)


async def test_breakers_own_account_rate_limit_never_rests_the_shared_target(fleet: Fleet) -> None:
    await fleet.result(FailureKind.RATE_LIMITED, retry_after_s=30.0, credential=Credential.OWN, credential_key=CRED)
    assert (await fleet.store.load([T])).entries[T] == Versioned(0, CLOSED)
    assert counts(await fleet.snapshot(CRED), fleet.time.epoch, SETTINGS) == (0.0, 1.0)
    assert await fleet.admit() == Gate(admitted=True)


async def test_breakers_tenant_key_success_counts_for_target_and_credential(fleet: Fleet) -> None:
    await fleet.result(FailureKind.SUCCESS, credential=Credential.OWN, credential_key=CRED)
    assert counts(await fleet.snapshot(T), fleet.time.epoch, SETTINGS) == (1.0, 0.0)
    assert counts(await fleet.snapshot(CRED), fleet.time.epoch, SETTINGS) == (1.0, 0.0)


async def test_breakers_tenant_key_without_a_credential_subject_counts_nowhere(fleet: Fleet) -> None:
    await fleet.result(FailureKind.AUTH, credential=Credential.OWN, credential_key=None)
    loaded = await fleet.store.load([T, CRED])
    assert loaded.entries == {T: Versioned(0, CLOSED), CRED: Versioned(0, CLOSED)}


async def test_breakers_credential_health_heals_through_half_open(fleet: Fleet) -> None:
    for _ in range(FRESH_RUN):
        await fleet.result(FailureKind.AUTH, credential=Credential.OWN, credential_key=CRED)
    assert not await fleet.breakers.credentials.admits(CRED, await fleet.view(T, CRED))
    fleet.time.advance(SETTINGS.cooldown_s)
    assert await fleet.breakers.credentials.admits(CRED, await fleet.view(T, CRED)), "HALF_OPEN: the next use probes"
    await fleet.result(FailureKind.SUCCESS, credential=Credential.OWN, credential_key=CRED)
    cred = await fleet.snapshot(CRED)
    assert not cred.open and cred.closed_at_s == fleet.time.epoch
    assert (CRED, BreakerState.HALF_OPEN, BreakerState.CLOSED) in fleet.transitions


# ------------------------------------------------------------------ trips


async def test_breakers_admit_while_a_run_is_too_short_to_open(fleet: Fleet) -> None:
    assert FRESH_RUN >= SETTINGS.consecutive_failures
    assert await fleet.admit() == Gate(admitted=True)
    await fleet.fail(FRESH_RUN - 1)
    assert await fleet.admit() == Gate(admitted=True)
    assert fleet.transitions == [] and fleet.trips == []


async def test_breakers_run_of_failures_rejects_for_the_cooldown(fleet: Fleet) -> None:
    await fleet.fail(FRESH_RUN)
    gate = await fleet.admit()
    assert gate == Gate(admitted=False, reopen_in_s=SETTINGS.cooldown_s, reason=SkipReason.CIRCUIT_OPEN)
    fleet.time.advance(3.0)
    gate = await fleet.admit()
    assert not gate.admitted
    assert gate.reopen_in_s == pytest.approx(SETTINGS.cooldown_s - 3.0)
    assert fleet.transitions == [(T, BreakerState.CLOSED, BreakerState.OPEN)]
    assert fleet.trips == [(T, "run", False)]
    snap = await fleet.snapshot()
    assert (snap.last_error, snap.trip_rule, snap.trips) == (f"HTTP 503 #{FRESH_RUN - 1}", "run", 1)


async def test_breakers_healthy_target_that_goes_hard_down_opens_within_three_calls(fleet: Fleet) -> None:
    await fleet.succeed(20)
    await fleet.fail(SETTINGS.consecutive_failures - 1)
    assert (await fleet.admit()).admitted
    await fleet.fail(1)
    assert not (await fleet.admit()).admitted
    assert fleet.trips == [(T, "run", False)]


async def test_breakers_rate_rule_opens_on_frequent_failures_without_a_long_run(fleet: Fleet) -> None:
    for calls in range(1, 61):  # success, failure, failure, ...: runs of 2 only
        await fleet.result(FailureKind.SUCCESS if calls % 3 == 1 else FailureKind.SERVER_ERROR)
        if (await fleet.snapshot()).open:
            break
    snap = await fleet.snapshot()
    assert snap.open and snap.trip_rule == "rate"
    assert fleet.trips == [(T, "rate", False)]


async def test_breakers_sole_target_opens_only_later(time: FakeTime, sleeper: ManualSleep) -> None:
    """A model's only target opens only at a high failure rate (SPEC §5): a
    hard-down one takes more failures than another target, at most its run."""
    fleet = Fleet(time, sleeper, sole_targets=frozenset({T}))
    assert SOLE_RUN > FRESH_RUN
    failures = 0
    while not (await fleet.snapshot()).open and failures < SOLE_RUN:
        await fleet.fail(1)
        failures += 1
    assert FRESH_RUN < failures <= SOLE_RUN
    assert not (await fleet.admit()).admitted
    assert [(t, sole) for t, _, sole in fleet.trips] == [(T, True)]
    await fleet.fail(FRESH_RUN, target=U)
    assert not (await fleet.admit(U)).admitted, "other targets keep the usual thresholds"
    assert fleet.trips[-1] == (U, "run", False)


async def test_breakers_recording_view_sees_its_own_trip(fleet: Fleet) -> None:
    view = await fleet.view()
    for _ in range(FRESH_RUN):
        await fleet.breakers.results.record(T, FailureKind.TIMEOUT, probe_token=None, error="timeout", view=view)
    assert view.entries[T].version == FRESH_RUN
    assert not (await fleet.breakers.gate.admit(T, view)).admitted


async def test_breakers_targets_are_independent(fleet: Fleet) -> None:
    await fleet.trip()
    view = await fleet.view(T, U)
    assert not (await fleet.breakers.gate.admit(T, view)).admitted
    assert (await fleet.breakers.gate.admit(U, view)).admitted


async def test_breakers_non_probe_results_while_open_only_count(fleet: Fleet) -> None:
    before_trip = await fleet.view()  # an attempt admitted before the trip
    await fleet.trip()
    opened = await fleet.snapshot()
    await fleet.breakers.results.record(T, FailureKind.SUCCESS, probe_token=None, error="", view=before_trip)
    await fleet.breakers.results.record(T, FailureKind.SERVER_ERROR, probe_token=None, error="late", view=before_trip)
    snap = await fleet.snapshot()
    assert (snap.open, snap.trips, snap.opened_at_s, snap.cooldown_s) == (
        True,
        1,
        opened.opened_at_s,
        opened.cooldown_s,
    )
    successes, failures = counts(snap, fleet.time.epoch, SETTINGS)
    assert successes == 1.0 and failures == pytest.approx(FRESH_RUN + 1)
    assert fleet.transitions == [(T, BreakerState.CLOSED, BreakerState.OPEN)]


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


# ------------------------------------------------------------------ not before (Retry-After)


@pytest.mark.parametrize("kind", [FailureKind.RATE_LIMITED, FailureKind.SERVER_ERROR], ids=lambda k: k.value)
async def test_breakers_retry_after_rests_the_target_fleet_wide_without_counting(
    fleet: Fleet, kind: FailureKind
) -> None:
    for _ in range(FRESH_RUN * 2):  # far more than a run that opens
        await fleet.result(kind, error="HTTP 429", retry_after_s=30.0)
    snap = await fleet.snapshot()
    assert snap.not_before_s == fleet.time.epoch + 30.0
    assert not snap.open and snap.trips == 0
    assert counts(snap, fleet.time.epoch, SETTINGS) == (0.0, 0.0), "a Retry-After is not a failure"

    other = fleet.process()  # another worker
    gate = await other.gate.admit(T, await other.reads.view([T]))
    assert (gate.admitted, gate.reason) == (False, SkipReason.RESTING)
    assert gate.reopen_in_s == pytest.approx(30.0 - NOT_BEFORE_SLACK_S)
    assert (await other.reads.view([T, U])).unavailable_for([T]) == pytest.approx(30.0 - NOT_BEFORE_SLACK_S)

    fleet.time.advance(29.0)
    assert (await other.gate.admit(T, await other.reads.view([T]))).reason is SkipReason.RESTING
    fleet.time.advance(1.0 - NOT_BEFORE_SLACK_S)
    assert await other.gate.admit(T, await other.reads.view([T])) == Gate(admitted=True)
    assert fleet.transitions == [] and fleet.trips == []


async def test_breakers_retry_after_is_capped_and_a_later_one_is_kept(fleet: Fleet) -> None:
    await fleet.result(FailureKind.RATE_LIMITED, retry_after_s=86_400.0)
    assert (await fleet.snapshot()).not_before_s == fleet.time.epoch + SETTINGS.max_not_before_s
    await fleet.result(FailureKind.RATE_LIMITED, retry_after_s=5.0)
    assert (await fleet.snapshot()).not_before_s == fleet.time.epoch + SETTINGS.max_not_before_s


async def test_breakers_probe_told_retry_after_waits_that_long_without_a_trip(fleet: Fleet) -> None:
    await fleet.trip_and_cool()
    view, gate = await fleet.probe()
    await fleet.breakers.results.record(
        T, FailureKind.RATE_LIMITED, probe_token=gate.probe_token, error="HTTP 429", view=view, retry_after_s=12.0
    )
    snap = await fleet.snapshot()
    now = fleet.time.epoch
    assert (snap.open, snap.trips, snap.not_before_s) == (True, 1, now + 12.0)
    assert state_at(snap, now + 11.9) is BreakerState.OPEN, "the next probe waits for the provider's time"
    assert await fleet.permit_free(), "the probe gave its permit back"
    gate = await fleet.admit()
    assert not gate.admitted and gate.reopen_in_s == pytest.approx(12.0)
    fleet.time.advance(12.0)
    assert (await fleet.admit()).probe


async def test_breakers_probe_told_retry_after_is_not_reported_as_a_trip(fleet: Fleet) -> None:
    """The trips metric counts trips by rule; a probe sent back by the provider's
    Retry-After is not one (the snapshot's `trips` does not grow either)."""
    await fleet.trip_and_cool()
    view, gate = await fleet.probe()
    await fleet.breakers.results.record(
        T, FailureKind.RATE_LIMITED, probe_token=gate.probe_token, error="HTTP 429", view=view, retry_after_s=12.0
    )
    assert (await fleet.snapshot()).trips == 1
    assert fleet.trips == [(T, "run", False)]


# ------------------------------------------------------------------ slow start


async def _closed_by_probe(fleet: Fleet) -> float:
    await fleet.trip_and_cool()
    view, gate = await fleet.probe()
    await fleet.breakers.results.record(T, FailureKind.SUCCESS, probe_token=gate.probe_token, error="", view=view)
    return fleet.time.epoch


SLOW_START_CASES = [
    (0.0, 10, 1),  # share 0.1
    (0.0, 25, 2),
    (5.0, 20, 11),  # share 0.55 half-way
    (9.0, 100, 91),  # share 0.91
    (10.0, 7, 7),  # full traffic after slow_start_s
    (60.0, 3, 3),
]


@pytest.mark.parametrize(
    ("after_s", "offered", "admitted"), SLOW_START_CASES, ids=[f"{a}s-{n}" for a, n, _ in SLOW_START_CASES]
)
async def test_breakers_slow_start_paces_the_share_of_offered_attempts(
    fleet: Fleet, after_s: float, offered: int, admitted: int
) -> None:
    await _closed_by_probe(fleet)
    fleet.time.advance(after_s)
    gates = [await fleet.admit() for _ in range(offered)]
    assert sum(g.admitted for g in gates) == admitted
    left_out = Gate(admitted=False, reopen_in_s=RAMP_RETRY_S, reason=SkipReason.RAMPING)
    assert all(g == Gate(admitted=True) or g == left_out for g in gates)


@hsettings(max_examples=60, deadline=None)
@given(after_s=st.floats(0.0, 15.0), offered=st.integers(1, 60))
def test_breakers_slow_start_never_admits_more_than_the_ramp(after_s: float, offered: int) -> None:
    """The admitted attempts are the configured share of those offered, rounded
    down: never a burst above the ramp (SPEC §5 slow start)."""

    async def scenario() -> None:
        time = FakeTime()
        fleet = Fleet(time, ManualSleep(time))  # the probe records before any renewal sleeps
        closed_at = await _closed_by_probe(fleet)
        fleet.time.advance(after_s)
        share = ramp_share(await fleet.snapshot(), fleet.time.epoch, SETTINGS)
        gates = [await fleet.admit() for _ in range(offered)]
        assert sum(g.admitted for g in gates) == math.floor(share * offered + 1e-9)
        assert all(g.admitted or g.reason is SkipReason.RAMPING for g in gates)
        assert share == 1.0 or fleet.time.epoch - closed_at < SETTINGS.slow_start_s

    asyncio.run(scenario())


async def test_breakers_slow_start_applies_to_a_view_read_before_the_close(fleet: Fleet) -> None:
    """B read HALF_OPEN; the probe A closes the breaker before B admits from its
    still-fresh view. B is not the probe, and it is held to the slow-start share
    like every other request."""
    await fleet.trip_and_cool()
    view_b = await fleet.view()
    view_a, gate_a = await fleet.probe()
    await fleet.breakers.results.record(T, FailureKind.SUCCESS, probe_token=gate_a.probe_token, error="", view=view_a)
    gate = await fleet.breakers.gate.admit(T, view_b)  # the first attempt after the close: 10 % share, paced
    assert gate == Gate(admitted=False, reopen_in_s=RAMP_RETRY_S, reason=SkipReason.RAMPING)
    assert await fleet.permit_free(), "the permit taken to check was given back"


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


# ------------------------------------------------------------------ HealthView


NOW = 1000.0


def _view(snapshots: dict[str, BreakerSnapshot], *, degraded: bool = False) -> HealthView:
    return HealthView(
        Loaded(now_s=NOW, entries={t: Versioned(1, s) for t, s in snapshots.items()}),
        clock=lambda: 0.0,
        degraded=degraded,
    )


def _opened(at: float, cooldown: float = 20.0) -> BreakerSnapshot:
    return BreakerSnapshot(
        open=True,
        trips=1,
        opened_at_s=at,
        cooldown_s=cooldown,
        failures=5.0,
        run_weight=5.0,
        run=5,
        counted_at_s=NOW,
    )


def _resting(until: float) -> BreakerSnapshot:
    return BreakerSnapshot(not_before_s=until)


UNAVAILABLE_CASES = [
    ({T: _opened(990.0), U: _opened(995.0)}, [T, U], 10.0),
    ({T: _opened(990.0), U: _opened(999.0, cooldown=5.0)}, [T, U], 4.0),
    ({T: _opened(990.0)}, [T], 10.0),
    ({T: _opened(990.0), U: _opened(900.0)}, [T, U], None),  # U is HALF_OPEN
    ({T: _opened(990.0), U: BreakerSnapshot(successes=3.0)}, [T, U], None),  # U is CLOSED
    ({T: _opened(990.0)}, [T, U], None),  # U unknown: CLOSED
    ({T: _opened(990.0)}, [], None),
    ({T: _opened(980.0)}, [T], None),  # exactly at the cooldown's end: HALF_OPEN
    ({T: _resting(1030.0)}, [T], 30.0 - NOT_BEFORE_SLACK_S),  # CLOSED but resting
    ({T: _resting(1030.0), U: _opened(990.0)}, [T, U], 10.0),
    ({T: _resting(NOW + NOT_BEFORE_SLACK_S)}, [T], None),  # the rest has just ended
    ({T: msgspec.structs.replace(_opened(900.0), not_before_s=1008.5)}, [T], 8.0),  # HALF_OPEN, resting
    ({T: msgspec.structs.replace(_opened(990.0), not_before_s=1030.0)}, [T], 29.5),  # OPEN and resting longer
]


@pytest.mark.parametrize(
    ("snapshots", "targets", "expected"),
    UNAVAILABLE_CASES,
    ids=[
        "all-open-min",
        "all-open-shorter-cooldown",
        "one-open",
        "one-half-open",
        "one-closed",
        "one-unknown",
        "no-targets",
        "boundary-half-open",
        "resting",
        "resting-and-open",
        "rest-just-ended",
        "half-open-resting",
        "open-resting-longer",
    ],
)
def test_health_view_unavailable_for(
    snapshots: dict[str, BreakerSnapshot], targets: Sequence[str], expected: float | None
) -> None:
    result = _view(snapshots).unavailable_for(targets)
    if expected is None:
        assert result is None
    else:
        assert result == pytest.approx(expected)


def test_health_view_degraded_is_never_unavailable() -> None:
    assert _view({T: _opened(990.0)}, degraded=True).unavailable_for([T]) is None


def test_health_view_extrapolates_with_its_clock() -> None:
    mono = [100.0]
    view = HealthView(Loaded(now_s=NOW, entries={T: Versioned(1, _opened(990.0))}), clock=lambda: mono[0])
    mono[0] += 4.0
    assert (view.age_s(), view.store_now()) == (4.0, NOW + 4.0)
    assert view.unavailable_for([T]) == pytest.approx(6.0)


_snapshots = st.builds(
    BreakerSnapshot,
    open=st.booleans(),
    trips=st.integers(0, 5),
    opened_at_s=st.floats(900.0, 1000.0),
    cooldown_s=st.sampled_from([5.0, 10.0, 20.0]),
    successes=st.floats(0.0, 50.0),
    failures=st.floats(0.0, 50.0),
    counted_at_s=st.floats(900.0, 1000.0),
    not_before_s=st.one_of(st.just(0.0), st.floats(990.0, 1100.0)),
)


@hsettings(max_examples=200)
@given(snaps=st.lists(_snapshots, min_size=1, max_size=4))
def test_health_view_unavailable_for_is_when_the_first_target_is_back(snaps: list[BreakerSnapshot]) -> None:
    """None exactly when some target may be attempted now (admit neither REJECTs
    nor RESTs it); otherwise a wait after which one may, and before which none may."""
    targets = [f"p{i}/m" for i in range(len(snaps))]
    view = _view(dict(zip(targets, snaps)))
    blocked = {Admission.REJECT, Admission.REST}

    def all_blocked(at: float) -> bool:
        return all(admit(s, at, SETTINGS) in blocked for s in snaps)

    wait = view.unavailable_for(targets)
    if wait is None:
        assert not all_blocked(NOW)
    else:
        assert wait > 0 and all_blocked(NOW)
        assert not all_blocked(NOW + wait + 1e-6)
        assert all_blocked(NOW + wait * (1 - 1e-6) - 1e-6)


@hsettings(max_examples=200)
@given(snaps=st.lists(_snapshots, min_size=1, max_size=4))
def test_health_view_ordering_health_agrees_with_admission(snaps: list[BreakerSnapshot]) -> None:
    targets = [f"p{i}/m" for i in range(len(snaps))]
    view = _view(dict(zip(targets, snaps)))
    health = view.ordering_health(SETTINGS)
    for target, snap in zip(targets, snaps):
        if snap == CLOSED:
            assert target not in health
            continue
        fact = health[target]
        decision = admit(snap, NOW, SETTINGS)
        expected = {Admission.REJECT: Standing.DOWN, Admission.REST: Standing.DOWN, Admission.PROBE: Standing.PROBE}
        assert fact.standing is expected.get(decision, Standing.UP)
        assert (fact.back_in_s > 0) == (fact.standing is Standing.DOWN)
        assert 0.0 < fact.score <= 1.0
        assert fact.score == pytest.approx(score(snap, NOW, SETTINGS))


def test_health_view_ordering_health_table() -> None:
    view = _view(
        {
            T: BreakerSnapshot(successes=3.0, failures=1.0, counted_at_s=NOW),
            U: _opened(995.0),
            "half/open": _opened(900.0),
            "rest/ing": _resting(1020.0),
            "never/seen": CLOSED,
        }
    )
    assert view.ordering_health(SETTINGS) == {
        T: TargetHealth(score=pytest.approx(5 / 6), standing=Standing.UP, back_in_s=0.0),  # type: ignore[arg-type]
        U: TargetHealth(score=pytest.approx(2 / 7), standing=Standing.DOWN, back_in_s=15.0),  # type: ignore[arg-type]
        "half/open": TargetHealth(
            score=pytest.approx(2 / 7),  # type: ignore[arg-type]
            standing=Standing.PROBE,
            back_in_s=0.0,
        ),
        "rest/ing": TargetHealth(score=1.0, standing=Standing.DOWN, back_in_s=20.0 - NOT_BEFORE_SLACK_S),
    }


async def test_health_view_old_failures_fade_without_traffic(fleet: Fleet) -> None:
    await fleet.fail(FRESH_RUN - 1)
    await fleet.succeed(1)
    scores = []
    for _ in range(5):
        scores.append((await fleet.view()).ordering_health(SETTINGS)[T].score)
        fleet.time.advance(SETTINGS.window / 2)
    assert scores == sorted(scores) and scores[0] < 0.5
    assert scores[-1] > 0.95, "after two windows the failures have all but faded"


# ------------------------------------------------------------------ outage policy


class DownStore:
    """A store whose every call fails like an unreachable Redis."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def _down(self, name: str) -> StateUnavailable:
        self.calls.append(name)
        return lost("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    async def load(self, targets: Sequence[str], caps: Sequence[str] = ()) -> Loaded:
        raise self._down("load")

    async def load_caps(self, subjects: Sequence[str]) -> dict[str, float]:
        raise self._down("load_caps")

    async def set_plan_cap(self, subject: str, *, until_s: float, ttl_s: float) -> None:
        raise self._down("set_plan_cap")

    async def record_speed(
        self, target: str, *, ttft_ms: float | None, tokens_per_s: float | None, alpha: float, ttl_s: int
    ) -> None:
        raise self._down("record_speed")

    async def compare_and_set(
        self, target: str, version: int, snapshot: BreakerSnapshot, speed: SpeedSamples = None, *, notify: bool = False
    ) -> Loaded | None:
        raise self._down("compare_and_set")

    async def acquire_probe(self, target: str, ttl_s: float) -> str | None:
        raise self._down("acquire_probe")

    async def release_probe(self, target: str, token: str) -> None:
        raise self._down("release_probe")

    async def renew_probe(self, target: str, token: str, ttl_s: float) -> bool:
        raise self._down("renew_probe")


async def test_breakers_outage_closed_policy_admits_and_reads_degraded(caplog: pytest.LogCaptureFixture) -> None:
    store = DownStore()
    breakers = Breakers.over(store, SETTINGS, on_store_error="closed")
    with caplog.at_level(logging.WARNING, logger="turnout.breaker"):
        view = await breakers.reads.view([T, U])
    assert view.degraded
    assert view.entries == {}
    assert view.unavailable_for([T, U]) is None
    assert await breakers.gate.admit(T, view) == Gate(admitted=True)
    assert await breakers.credentials.admits(CRED, view)
    for _ in range(5):
        await breakers.results.record(T, FailureKind.SERVER_ERROR, probe_token=None, error="x", view=view)
    assert store.calls == ["load"], "a degraded view records nothing"
    assert "on_store_error=closed" in caplog.text


async def test_breakers_outage_fail_policy_refuses_with_redis_unavailable() -> None:
    breakers = Breakers.over(DownStore(), SETTINGS, on_store_error="fail")
    with pytest.raises(GatewayUnavailable) as info:
        await breakers.reads.view([T])
    assert info.value.code == "redis_unavailable"
    assert info.value.retry_after_s >= 1
    assert isinstance(info.value.__cause__, StateUnavailable)
    assert isinstance(info.value.__cause__.__cause__, RedisConnectionError)


@pytest.mark.parametrize("policy", ["closed", "fail"])
@pytest.mark.parametrize("probe", [False, True], ids=["plain", "probe"])
async def test_breakers_outage_during_record_never_raises(
    time: FakeTime, sleeper: ManualSleep, policy: StoreErrorPolicy, probe: bool
) -> None:
    """The attempt already ran: losing Redis afterwards must not turn its result
    (maybe a served answer, maybe a cancellation) into a 503."""
    store = FlakyStore(time)
    fleet = Fleet(time, sleeper, store=store, on_store_error=policy)
    view = await fleet.view(T, CRED)
    token = await store.acquire_probe(T, SETTINGS.probe_ttl_s) if probe else None
    store.down = True
    for kind in [FailureKind.SUCCESS, FailureKind.SERVER_ERROR, FailureKind.CANCELLED, FailureKind.AUTH]:
        await fleet.breakers.results.record(
            T, kind, probe_token=token, error="x", view=view, credential=Credential.OWN, credential_key=CRED
        )
    await fleet.breakers.results.record(
        T, FailureKind.RATE_LIMITED, probe_token=token, error="", view=view, retry_after_s=3.0
    )


async def test_breakers_outage_closed_policy_admits_when_the_probe_permit_is_unreachable(
    time: FakeTime, sleeper: ManualSleep
) -> None:
    store = FlakyStore(time)
    fleet = Fleet(time, sleeper, store=store)
    await fleet.trip_and_cool()
    view = await fleet.view()
    store.down = True
    assert await fleet.breakers.gate.admit(T, view) == Gate(admitted=True)


async def test_breakers_outage_fail_policy_refuses_when_the_probe_permit_is_unreachable(
    time: FakeTime, sleeper: ManualSleep
) -> None:
    store = FlakyStore(time)
    fleet = Fleet(time, sleeper, store=store, on_store_error="fail")
    await fleet.trip_and_cool()
    view = await fleet.view()
    store.down = True
    with pytest.raises(GatewayUnavailable):
        await fleet.breakers.gate.admit(T, view)


async def test_breakers_outage_fail_policy_refuses_a_stale_reread(time: FakeTime, sleeper: ManualSleep) -> None:
    store = FlakyStore(time)
    fleet = Fleet(time, sleeper, store=store, on_store_error="fail")
    view = await fleet.view()
    time.advance(STALE_AFTER_S + 0.1)
    store.down = True
    with pytest.raises(GatewayUnavailable) as info:
        await fleet.breakers.gate.admit(T, view)
    assert info.value.code == "redis_unavailable"
    with pytest.raises(GatewayUnavailable):
        await fleet.breakers.credentials.admits(CRED, view)


class LosesRedisAfterTheProbePermit(CountingStore):
    """The permit is taken, then the store goes away before the re-read."""

    down = False

    async def acquire_probe(self, target: str, ttl_s: float) -> str | None:
        token = await super().acquire_probe(target, ttl_s)
        self.down = True
        return token

    async def load(self, targets: Sequence[str], caps: Sequence[str] = ()) -> Loaded:
        if self.down:
            raise lost("connection lost")
        return await super().load(targets, caps)


async def test_breakers_outage_after_taking_the_permit_admits_as_the_probe(
    time: FakeTime, sleeper: ManualSleep
) -> None:
    store = LosesRedisAfterTheProbePermit(time)
    fleet = Fleet(time, sleeper, store=store)
    await store.compare_and_set(T, 0, _opened(time.epoch - 30.0, cooldown=5.0))
    # The permit is held, so the attempt is the probe: record() gives the permit back.
    gate = await fleet.breakers.gate.admit(T, await fleet.view())
    assert gate.admitted and gate.probe and gate.reopen_in_s is None
    await settle()
    assert await store.acquire_probe(T, 30.0) is None, "the gate holds the permit"
    assert sleeper.held_delays() == [RENEW_EVERY_S], "and renews it"


# ------------------------------------------------------------------ CAS retries


class AlwaysConflicting(CountingStore):
    """Every write loses a race."""

    writes = 0

    async def compare_and_set(
        self, target: str, version: int, snapshot: BreakerSnapshot, speed: SpeedSamples = None, *, notify: bool = False
    ) -> Loaded | None:
        self.writes += 1
        return Loaded(now_s=self._clock(), entries={target: Versioned(version + 1, CLOSED)})


async def test_breakers_record_gives_up_after_bounded_conflicts(
    time: FakeTime, sleeper: ManualSleep, caplog: pytest.LogCaptureFixture
) -> None:
    store = AlwaysConflicting(time)
    fleet = Fleet(time, sleeper, store=store)
    fleet.rng.draw = 0.999
    with caplog.at_level(logging.ERROR, logger="turnout.breaker"):
        await fleet.result(FailureKind.SERVER_ERROR, error="x")
    assert store.writes == 100
    assert "not recorded" in caplog.text
    # Backoff between conflicting writes: full jitter, at most 20 ms.
    assert sleeper.delays and max(sleeper.delays) <= 0.02
    assert sleeper.delays == sorted(sleeper.delays), "the jitter's range grows, then stays capped"


async def test_breakers_record_recomputes_from_the_current_entry_on_conflict(fleet: Fleet) -> None:
    stale = await fleet.view()
    await fleet.fail(FRESH_RUN - 1)
    await fleet.breakers.results.record(T, FailureKind.SERVER_ERROR, probe_token=None, error="last", view=stale)
    snap = await fleet.snapshot()
    assert snap.open, "the last failure must count on top of the stored ones"
    assert snap.last_error == "last"
    assert stale.entries[T].version == FRESH_RUN
    assert fleet.transitions == [(T, BreakerState.CLOSED, BreakerState.OPEN)]


class HeldWrites(CountingStore):
    """Writes wait until released, so results queue behind one in flight; keeps what each write carried."""

    def __init__(self, time: FakeTime) -> None:
        super().__init__(time)
        self.release = asyncio.Event()
        self.written: list[tuple[BreakerSnapshot, tuple[SpeedSample, ...]]] = []

    async def compare_and_set(
        self, target: str, version: int, snapshot: BreakerSnapshot, speed: SpeedSamples = None, *, notify: bool = False
    ) -> Loaded | None:
        await self.release.wait()
        self.written.append((snapshot, samples(speed)))
        return await super().compare_and_set(target, version, snapshot, speed, notify=notify)


async def test_breakers_results_queued_behind_a_write_go_in_the_next_one_in_order(
    time: FakeTime, sleeper: ManualSleep
) -> None:
    """Ten results recorded while one write is in flight are written by one more
    compare-and-set, as if applied one by one: the same counts, the run, the last
    error, and every speed sample folded in order."""
    store = HeldWrites(time)
    fleet = Fleet(time, sleeper, store=store)
    view = await fleet.view()
    speed = Speed(ttft_ms=10.0, tokens_per_s=None)
    first = asyncio.create_task(
        fleet.breakers.results.record(T, FailureKind.SUCCESS, probe_token=None, error="", view=view, measures=speed)
    )
    await _real_sleep(0)
    queued = [
        asyncio.create_task(
            fleet.breakers.results.record(
                T,
                FailureKind.SERVER_ERROR,
                probe_token=None,
                error=f"e{i}",
                view=view,
                measures=Speed(ttft_ms=float(i), tokens_per_s=None),
            )
        )
        for i in range(10)
    ]
    await _real_sleep(0)
    store.release.set()
    await asyncio.gather(first, *queued)
    assert len(store.written) == 2, "one write for the first result, one for the ten queued behind it"
    one_by_one = CountingStore(time)
    expected = Breakers.over(one_by_one, fleet.settings, clock=time.monotonic)
    await expected.results.record(
        T, FailureKind.SUCCESS, probe_token=None, error="", view=await expected.reads.view([T])
    )
    for i in range(10):
        await expected.results.record(
            T, FailureKind.SERVER_ERROR, probe_token=None, error=f"e{i}", view=await expected.reads.view([T])
        )
    last, carried = store.written[1]
    assert (last.run, last.last_error, last.open) == (10, "e9", True)
    assert last == (await one_by_one.load([T])).entries[T].snapshot
    assert [s.ttft_ms for s in carried] == [float(i) for i in range(10)], "samples folded in arrival order"
    assert view.entries[T].version == 2, "the callers' view holds the written snapshot"


async def test_breakers_result_of_a_caller_that_stops_waiting_is_still_written(
    time: FakeTime, sleeper: ManualSleep
) -> None:
    """A caller cancelled while its result waits for the write (client gone) loses
    nothing: the write runs on in its own task."""
    store = HeldWrites(time)
    fleet = Fleet(time, sleeper, store=store)
    view = await fleet.view()
    waiting = asyncio.create_task(
        fleet.breakers.results.record(T, FailureKind.SERVER_ERROR, probe_token=None, error="gone", view=view)
    )
    await _real_sleep(0)
    waiting.cancel()
    await asyncio.wait([waiting])
    assert waiting.cancelled()
    store.release.set()
    for _ in range(5):
        await _real_sleep(0)
    assert [snap.last_error for snap, _ in store.written] == ["gone"]


async def test_breakers_record_cancelled_while_stopping_the_renewal_stays_cancelled(fleet: Fleet) -> None:
    """A request cancelled (client gone, deadline) while `record` waits for the
    permit's renewal to stop must still end cancelled: the wait may not swallow
    the caller's own cancellation."""
    await fleet.trip_and_cool()
    view, gate = await fleet.probe()
    recording = asyncio.create_task(
        fleet.breakers.results.record(T, FailureKind.SUCCESS, probe_token=gate.probe_token, error="", view=view)
    )
    await _real_sleep(0)  # record() runs until it waits for the renewal task to end
    assert not recording.done()
    recording.cancel()
    await asyncio.wait([recording])
    assert recording.cancelled(), "the caller's cancellation was swallowed"


async def test_health_view_orders_by_the_measures_of_closed_targets_too() -> None:
    """SPEC §10: the view's ordering facts carry each target's rolling
    measures, read in the same load as the snapshots."""
    from turnout.core.breaker import BreakerSettings
    from turnout.health import Breakers
    from turnout.state.breaker_store import MemoryBreakerStore

    breakers = Breakers.over(MemoryBreakerStore(), BreakerSettings(), speed_alpha=0.5)
    await breakers.speed.record("a/m", ttft_ms=100.0, tokens_per_s=None)
    await breakers.speed.record("a/m", ttft_ms=300.0, tokens_per_s=40.0)
    await breakers.speed.record("b/m", ttft_ms=None, tokens_per_s=None)  # nothing to record
    view = await breakers.reads.view(["a/m", "b/m"])
    health = view.ordering_health(breakers.settings)
    assert set(health) == {"a/m"}
    assert health["a/m"].ttft_ms == 200.0 and health["a/m"].tokens_per_s == 40.0
    assert health["a/m"].score == 1.0
