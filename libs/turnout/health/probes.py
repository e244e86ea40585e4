"""The fleet-wide HALF_OPEN probe permit of a target, held while the probe runs (SPEC §5).

Owns: taking a target's probe permit from the store, renewing it every third of
its TTL while the probe runs (at most `MAX_PROBE_HOLD_S`, a guard against a lost
release), and giving it back. A permit whose holder dies expires on its own.
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from turnout.health.outage import OutagePolicy
from turnout.state.bounds import REQUEST_REDIS_TIMEOUT_S
from turnout.state.breaker_store import BreakerStore
from turnout.state.errors import StateUnavailable

MAX_PROBE_HOLD_S = 3600.0
"""A probe permit is renewed at most this long (a guard against a lost release)."""


class ProbePermits:
    """The probe permits this process holds.

    Args:
        store: where permits live.
        ttl_s: a permit's time to live (`BreakerSettings.probe_ttl_s`, seconds).
        outage: the store-outage policy (a failed renewal or release never refuses).
        clock: monotonic seconds (the hold cap).
    """

    def __init__(
        self, store: BreakerStore, ttl_s: float, outage: OutagePolicy, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._store = store
        self._ttl_s = ttl_s
        self._outage = outage
        self._clock = clock
        self._renewals: dict[str, asyncio.Task[None]] = {}  # token -> its renewal

    async def acquire(self, target: str) -> str | None:
        """Take `target`'s permit: its token, or None while another attempt holds it.

        Raises:
            StateUnavailable: the store is unreachable.
        """
        return await self._store.acquire_probe(target, self._ttl_s)

    def hold(self, target: str, token: str) -> None:
        """Renew the permit `token` every third of its TTL until it is released (or lost)."""
        ttl = self._ttl_s

        async def renew() -> None:
            started = self._clock()
            while self._clock() - started < MAX_PROBE_HOLD_S:
                await asyncio.sleep(ttl / 3)
                try:
                    if not await self._store.renew_probe(target, token, ttl):
                        return
                except (StateUnavailable, TimeoutError) as exc:
                    self._outage(exc, refuse=False)

        self._renewals[token] = asyncio.get_running_loop().create_task(renew(), name=f"probe-renew {target}")

    async def release(self, target: str, token: str) -> None:
        """Stop renewing `token` and give the permit back (a store outage: it expires on its own)."""
        task = self._renewals.pop(token, None)
        if task is not None:
            task.cancel()
            await asyncio.wait([task])  # never swallows a cancellation of the caller
        try:
            async with asyncio.timeout(REQUEST_REDIS_TIMEOUT_S):
                await self._store.release_probe(target, token)
        except (StateUnavailable, TimeoutError) as exc:  # the permit expires on its own
            self._outage(exc, refuse=False)
