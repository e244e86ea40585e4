"""A recovery herd against slow start by rate, through real Redis (issue #41 item 7; SPEC §5 slow start).

1,000 clients obeying `Retry-After` wait behind an open breaker of a provider whose capacity is
50 calls/s; four processes' `Breakers` share one Redis. After the cooldown one client's request is
the probe, its success closes the breaker, and every client asks again when its `Retry-After`
(whole seconds, at least 1, spread over one more such wait, as the ingress answers) has passed.
The provider counts the calls it gets after the close: the peak of any one-second window in the
first 5 s must stay within 1.2 × its capacity, whatever the offered load (it was 73 calls/s,
1.46 ×, when slow start admitted a share of the attempts offered to each process).
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest
from redis.asyncio import Redis

import turnout.health.probes
import turnout.health.reads
import turnout.health.results
from turnout.core.breaker import BreakerSettings
from turnout.core.types import FailureKind
from turnout.health import Breakers
from turnout.state import keys
from turnout.state.breaker_store import RedisBreakerStore

T = "herd/model"
CAPACITY = 50
CLIENTS = 1000
PROCESSES = 4
WATCH_S = 5.0
SETTINGS = BreakerSettings(cooldown_s=4.0, max_cooldown_s=4.0)
"""The default slow start (10 s, 5 → 50 calls/s fleet-wide); a cooldown the herd has time to gather in."""


class Herd:
    """The clients, the provider's count of calls, and the close."""

    def __init__(self) -> None:
        self.closed_at: float | None = None
        self.calls: list[float] = []  # when each call after the close reached the provider (s after it)
        self.rng = random.Random(7)

    def over(self) -> bool:
        return self.closed_at is not None and time.monotonic() > self.closed_at + WATCH_S

    async def client(self, breakers: Breakers) -> None:
        while not self.over():
            view = await breakers.reads.view([T])
            gate = await breakers.gate.admit(T, view)
            if gate.admitted:
                if self.closed_at is not None:
                    self.calls.append(time.monotonic() - self.closed_at)
                await asyncio.sleep(0.05)  # the call itself
                if gate.probe:  # the provider is back: the probe's success closes the breaker
                    await breakers.results.record(
                        T, FailureKind.SUCCESS, probe_token=gate.probe_token, error="", view=view
                    )
                    self.closed_at = time.monotonic()
                continue
            await asyncio.sleep(max(1.0, gate.reopen_in_s or 1.0) * (1 + self.rng.random()))


async def test_a_herd_after_a_close_gets_at_most_the_ramps_calls_per_second(
    redis_client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    for part in (turnout.health.reads, turnout.health.probes):
        monkeypatch.setattr(part, "REQUEST_REDIS_TIMEOUT_S", 30.0)  # a loaded machine: about counts, not bounds
    monkeypatch.setattr(turnout.health.results, "RECORD_TIMEOUT_S", 30.0)
    await redis_client.delete(keys.breaker_key(T), keys.probe_key(T), keys.ramp_key(T))
    processes = [Breakers.over(RedisBreakerStore(redis_client), SETTINGS) for _ in range(PROCESSES)]
    first = processes[0]
    for _ in range(SETTINGS.consecutive_failures + 5):  # the provider went down: the breaker opens
        view = await first.reads.view([T])
        await first.results.record(T, FailureKind.SERVER_ERROR, probe_token=None, error="503", view=view)
    await first.results.drain()
    herd = Herd()
    await asyncio.wait_for(asyncio.gather(*(herd.client(processes[i % PROCESSES]) for i in range(CLIENTS))), 60)
    calls = herd.calls
    per_second = [sum(1 for c in calls if s <= c < s + 1) for s in range(int(WATCH_S))]
    peak = max(sum(1 for c in calls if t0 <= c < t0 + 1) for t0 in calls)
    print(f"calls per second after the close: {per_second}; peak of any 1 s window: {peak}")
    assert peak <= 1.2 * CAPACITY, per_second
    assert per_second[0] >= 3, f"the recovered target gets traffic at once: {per_second}"
    assert sum(per_second) >= 10, f"the ramp is used, not starved: {per_second}"
