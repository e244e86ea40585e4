"""The clock-skew check every process runs: its wall clock against Redis `TIME`.

Owns: one `TIME` round trip at start and every `interval_s` (30 s), the
estimate (`turnout.core.clock.skew_s`, the midpoint of the round trip), the
gauge `turnout_clock_skew_seconds` (always set) and a structured warning when
the skew is beyond 1 s (issue #14 item 3). Deadlines never read this: they
are measured on Redis's clock (`turnout.state.queue.time_left_s`).
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from prometheus_client import Gauge
from redis.asyncio import Redis

from turnout.core.clock import skew_alarming, skew_s
from turnout.state.errors import maps_state_errors
from turnout.state.periodic import Periodic

log = logging.getLogger("turnout.clock")

CHECK_INTERVAL_S = 30.0
"""Seconds between two checks."""


@maps_state_errors
class ClockSkewCheck:
    """Measures this process's clock skew against Redis, now and every `interval_s`.

    Args:
        redis: any client of the fleet's Redis.
        gauge: where the last skew goes (seconds, positive: this clock ahead).
        service: the process kind named in the warning ("turnout-ingress").
        wall: this process's wall clock (epoch s); injected in tests.
        interval_s: seconds between checks.
        sleep: the wait between checks; injected in tests.
    """

    def __init__(
        self,
        redis: Redis,
        gauge: Gauge,
        *,
        service: str,
        wall: Callable[[], float] = time.time,
        interval_s: float = CHECK_INTERVAL_S,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._redis = redis
        self._gauge = gauge
        self._service = service
        self._wall = wall
        self._periodic = Periodic("turnout-clock-check", self.check_once, interval_s, sleep)

    async def check_once(self) -> float:
        """One measure: sets the gauge, warns beyond 1 s, returns the skew (seconds).

        Raises:
            StateUnavailable: Redis unreachable (the gauge keeps its last value).
        """
        sent = self._wall()
        seconds, micros = await self._redis.time()
        received = self._wall()
        skew = skew_s(sent, int(seconds) + int(micros) / 1e6, received)
        self._gauge.set(skew)
        if skew_alarming(skew):
            log.warning(
                "this process's clock is %.3f s %s Redis's (deadlines use Redis's clock; fix the host's time sync)",
                abs(skew),
                "ahead of" if skew > 0 else "behind",
                extra={
                    "clock_skew_s": round(skew, 3),
                    "round_trip_s": round(received - sent, 4),
                    "service_kind": self._service,
                },
            )
        return skew

    async def run(self) -> None:
        """Check now, then every `interval_s`, until cancelled (a Redis error skips a round)."""
        await self._periodic.run()

    def start(self) -> None:
        """Start `run` as a task of the running loop."""
        self._periodic.start()

    async def stop(self) -> None:
        """Stop the task (no-op if not started)."""
        await self._periodic.stop()
