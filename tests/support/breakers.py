"""`Breakers` over `MemoryBreakerStore` with injected time (SPEC §5): the fakes and the `Fleet` the
`tests/unit/health` tests share.

Time is fake on both sides: the store's clock (epoch seconds) and the
process's monotonic clock (view ages, store-time extrapolation) move together
only when a test says so. The probe permit's renewal sleeps inside
`turnout.health.probes` are held until the test ticks them (`ManualSleep`), so a
renewal happens exactly when a test lets it; shorter sleeps (the CAS backoff
jitter, at most 20 ms) return at once. Slow-start draws come from an RNG the
test sets.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

from redis.exceptions import ConnectionError as RedisConnectionError

from turnout.core.breaker import (
    CLOSED,
    BreakerSettings,
    BreakerSnapshot,
    BreakerState,
    run_needed,
)
from turnout.core.credentials import Credential
from turnout.core.loop import SkipReason
from turnout.core.types import FailureKind
from turnout.health import (
    RAMP_RETRY_S,
    BreakerHooks,
    Breakers,
    Gate,
    HealthView,
    StoreErrorPolicy,
    credential_subject,
)
from turnout.state.breaker_store import Loaded, MemoryBreakerStore, SpeedSamples
from turnout.state.errors import StateUnavailable, state_errors

T = "acme/model-a"
U = "other/model-b"
ORG = "org-1"
CRED = credential_subject(ORG, "acme")
SETTINGS = BreakerSettings(slow_start_rps=0.0)
"""Cooldown 5 s doubling to 20 s, probe TTL 10 s, slow start 10 s from 10 % by the share of offered
attempts (`slow_start_rps: 0`); `RATE_SETTINGS` is the default ramp by rate."""
RATE_SETTINGS = BreakerSettings()
"""The defaults: slow start by rate, 5 calls/s fleet-wide right after a close, 50/s at its end."""
FRESH_RUN = run_needed(CLOSED, 0.0, SETTINGS, sole=False)
"""Failures in a row that open a target with no history (the run rule)."""
SOLE_RUN = run_needed(CLOSED, 0.0, SETTINGS, sole=True)
"""The same for a model's only target."""
RENEW_EVERY_S = SETTINGS.probe_ttl_s / 3

Transition = tuple[str, BreakerState, BreakerState]
real_sleep = asyncio.sleep


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
            await real_sleep(0)
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
        await real_sleep(0)


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

    async def take_ramp_slot(self, target: str, rate: float) -> float:
        self._check()
        return await super().take_ramp_slot(target, rate)


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


CIRCUIT_OPEN_PROBE_IN_FLIGHT = Gate(admitted=False, reopen_in_s=RAMP_RETRY_S, reason=SkipReason.CIRCUIT_OPEN)

NEUTRAL_KINDS = [  # results that count nowhere for a target on the platform key
    FailureKind.CLIENT_ERROR,
    FailureKind.AUTH,
    FailureKind.QUOTA_EXHAUSTED,
    FailureKind.CANCELLED,
    FailureKind.NO_CREDENTIAL,
    FailureKind.CONTEXT_LENGTH,
    FailureKind.CONTENT_POLICY,
]


NOW = 1000.0


def opened(at: float, cooldown: float = 20.0) -> BreakerSnapshot:
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
