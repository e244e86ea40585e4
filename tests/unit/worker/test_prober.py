"""The fleet's active prober (`turnout_worker.prober`; issue #41 item 6): only the lease holder probes,
only due targets (`turnout.core.active_probe`), with the probe permit a client's probe takes; a
failure reopens the breaker, a success closes it into slow start. Time is the store's (fake)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import httpx
import pytest

import turnout.health.probes
import turnout.health.writes
from support.answers import OPENAI_COMPLETION
from support.breakers import AsyncioWithSleep, FakeTime, Fleet, ManualSleep, T
from turnout.catalog import Catalog
from turnout.config import parse_config
from turnout.core.breaker import BreakerState, state_at
from turnout.scrub import Scrubber
from turnout.state.breaker_store import Loaded
from turnout_worker.prober import ActiveProber, probed_targets, tick_for

CONFIG = """
providers:
  acme: {kind: openai_compatible, base_url: "https://upstream.test/v1", api_key: sk-probe-test-key, PROBE}
  q: {kind: openai_compatible, base_url: "https://other.test/v1", api_key: sk-other-key}
models:
  m: {offers: [{provider: acme, model: model-a}, {provider: q, model: model-a}]}
"""


class FakeLease:
    def __init__(self, held: bool = True) -> None:
        self.held = held
        self.holds = 0
        self.released = 0

    async def hold(self) -> bool:
        self.holds += 1
        return self.held

    async def release(self) -> None:
        self.released += 1


class Upstream:
    """The provider: answers each call with `status` (200: a one-token chat completion), keeps the calls."""

    def __init__(self) -> None:
        self.status = 503
        self.calls: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(request)
        if self.status == 200:
            return httpx.Response(200, json=OPENAI_COMPLETION)
        return httpx.Response(self.status, json={"error": {"message": "down", "type": "server_error"}})


def _catalog(probe: str = "probe: {active: true, interval_s: 2, call: tiny_request}") -> Catalog:
    return Catalog(parse_config(CONFIG.replace("PROBE", probe)))


@pytest.fixture
def upstream() -> Upstream:
    return Upstream()


@pytest.fixture
def fleet(monkeypatch: pytest.MonkeyPatch) -> Fleet:
    """Breakers over a memory store on fake time; the permits' renewals wait for the test."""
    time = FakeTime()
    sleeper = ManualSleep(time)
    monkeypatch.setattr(turnout.health.probes, "asyncio", AsyncioWithSleep(sleeper))
    monkeypatch.setattr(turnout.health.writes, "asyncio", AsyncioWithSleep(sleeper))
    return Fleet(time, sleeper)


def _prober(fleet: Fleet, upstream: Upstream, lease: FakeLease, catalog: Catalog | None = None) -> ActiveProber:
    http = httpx.AsyncClient(transport=httpx.MockTransport(upstream))
    return ActiveProber(catalog or _catalog(), fleet.breakers, http, lease, Scrubber())


async def _probes_end(prober: ActiveProber) -> None:
    for _ in range(20):
        await asyncio.sleep(0)
    running = list(prober._running.values())
    await asyncio.gather(*running)


async def test_only_providers_with_an_active_probe_are_probed_and_nothing_is_asked_without_one(
    fleet: Fleet, upstream: Upstream
) -> None:
    assert set(probed_targets(_catalog())) == {T}
    assert tick_for(probed_targets(_catalog())) == 0.5
    lease = FakeLease()
    prober = _prober(fleet, upstream, lease, _catalog(probe="probe: {active: false}"))
    loads: list[Sequence[str]] = []
    original = fleet.store.load

    async def load(targets: Sequence[str], caps: Sequence[str] = ()) -> Loaded:
        loads.append(targets)
        return await original(targets, caps)

    fleet.store.load = load  # type: ignore[method-assign]
    assert await prober.round() == []
    assert lease.holds == 0 and loads == [], "no probe configured: no Redis command at all"


async def test_a_worker_without_the_lease_probes_nothing(fleet: Fleet, upstream: Upstream) -> None:
    await fleet.trip()
    fleet.time.advance(60)
    prober = _prober(fleet, upstream, FakeLease(held=False))
    assert await prober.round() == []
    assert upstream.calls == []


async def test_an_open_target_is_probed_every_interval_until_it_heals_then_closes_into_slow_start(
    fleet: Fleet, upstream: Upstream
) -> None:
    prober = _prober(fleet, upstream, FakeLease())
    assert await prober.round() == [], "a closed target is never probed"
    await fleet.trip()  # cooldown 5 s, the interval 2 s: the first probe 2 s after the trip
    fleet.time.advance(1.9)
    assert await prober.round() == []
    fleet.time.advance(0.1)
    assert await prober.round() == [T]
    await _probes_end(prober)
    assert len(upstream.calls) == 1 and upstream.calls[0].url.host == "upstream.test"
    snap = await fleet.snapshot()
    assert snap.trips == 2 and snap.cooldown_s == 10.0, "the failed probe reopened it with a longer cooldown"
    fleet.time.advance(1.0)
    assert await prober.round() == [], "not before the interval"
    upstream.status = 200
    fleet.time.advance(1.0)
    assert await prober.round() == [T]
    await _probes_end(prober)
    snap = await fleet.snapshot()
    assert state_at(snap, fleet.time.epoch) is BreakerState.CLOSED and snap.closed_at_s == fleet.time.epoch
    assert (BreakerState.OPEN.value, BreakerState.CLOSED.value) == (
        fleet.transitions[-1][1].value,
        fleet.transitions[-1][2].value,
    )
    fleet.time.advance(10.0)
    assert await prober.round() == [] and len(upstream.calls) == 2, "closed: no more probes"


async def test_a_clients_probe_in_flight_keeps_the_active_probe_away(fleet: Fleet, upstream: Upstream) -> None:
    await fleet.trip_and_cool()
    _view, gate = await fleet.probe()  # a client's request holds the permit
    prober = _prober(fleet, upstream, FakeLease())
    assert await prober.round() == [T]
    await _probes_end(prober)
    assert upstream.calls == [], "the permit was taken: no active probe went"
    assert gate.probe_token is not None
    await fleet.breakers.probes.release(T, gate.probe_token)


async def test_stopping_gives_the_lease_back(fleet: Fleet, upstream: Upstream) -> None:
    lease = FakeLease()
    prober = _prober(fleet, upstream, lease)
    prober.start()
    await asyncio.sleep(0.01)
    await prober.stop()
    assert lease.holds >= 1 and lease.released == 1


def test_a_chat_probe_goes_only_to_chat_offers() -> None:
    config = """
providers:
  acme: {kind: openai_compatible, base_url: "https://upstream.test/v1", api_key: sk-probe-test-key, PROBE}
models:
  chat: {offers: [{provider: acme, model: model-a}]}
  vectors: {type: embedding, offers: [{provider: acme, model: embed-a}]}
"""
    tiny = Catalog(parse_config(config.replace("PROBE", "probe: {active: true, call: tiny_request}")))
    listing = Catalog(parse_config(config.replace("PROBE", "probe: {active: true}")))
    assert set(probed_targets(tiny)) == {T}
    assert set(probed_targets(listing)) == {T, "acme/embed-a"}
