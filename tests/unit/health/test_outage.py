"""The store-outage policy (`turnout.health.outage`; SPEC §5)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from support.breakers import (
    CRED,
    RENEW_EVERY_S,
    SETTINGS,
    CountingStore,
    FakeTime,
    FlakyStore,
    Fleet,
    ManualSleep,
    T,
    U,
    lost,
    opened,
    settle,
)
from turnout.core.breaker import (
    BreakerSnapshot,
)
from turnout.core.credentials import Credential
from turnout.core.types import FailureKind
from turnout.errors import GatewayUnavailable
from turnout.health import (
    STALE_AFTER_S,
    Breakers,
    Gate,
    StoreErrorPolicy,
)
from turnout.state.breaker_store import Loaded, SpeedSamples
from turnout.state.errors import StateUnavailable

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

    async def take_ramp_slot(self, target: str, rate: float) -> float:
        raise self._down("take_ramp_slot")


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
    await store.compare_and_set(T, 0, opened(time.epoch - 30.0, cooldown=5.0))
    # The permit is held, so the attempt is the probe: record() gives the permit back.
    gate = await fleet.breakers.gate.admit(T, await fleet.view())
    assert gate.admitted and gate.probe and gate.reopen_in_s is None
    await settle()
    assert await store.acquire_probe(T, 30.0) is None, "the gate holds the permit"
    assert sleeper.held_delays() == [RENEW_EVERY_S], "and renews it"
