"""Each ingress's liveness lease, and a worker's view of them (issue 41, build item 3).

Owns: `keys.INGRESS_LEASES` (a hash: an ingress's reply channel -> until when its lease runs,
Redis `TIME` ms). `IngressLease` (one per ingress process, started and stopped with its
`JobQueue`) renews its own every `INGRESS_RENEW_S` in one script (`HSET` of Redis `TIME` +
`INGRESS_LEASE_MS`); `IngressWatch` (one per worker) reads them every `WATCH_EVERY_S` (one
script: Redis `TIME` and `HGETALL`) and, only when a lease ran out, asks Redis who still listens on
that ingress's channel (`PUBSUB NUMSUB`); the rule is `turnout.core.liveness.ingress_gone`.
Both are background loops: a request's own Redis commands are unchanged. Time (sleep) is injected.
Must not import: services, FastAPI, httpx, arq.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from redis.asyncio import Redis

from turnout.core.liveness import (
    INGRESS_LEASE_MS,
    INGRESS_RENEW_S,
    WATCH_EVERY_S,
    forget,
    ingress_gone,
    lease_out,
    view_came_back,
)
from turnout.state import keys
from turnout.state.errors import StateUnavailable, state_errors

log = logging.getLogger("turnout.queue")

# KEYS: leases hash   ARGV: reply channel, lease ms (0: end it now)
# Returns Redis TIME ms.
# KEYS: leases hash   Returns {Redis TIME ms, the hash's fields and values, flat}: one command per read.
_READ = """
local t = redis.call('time')
return {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), redis.call('hgetall', KEYS[1])}
"""

_RENEW = """
local t = redis.call('time')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[2])
redis.call('hset', KEYS[1], ARGV[1], lease > 0 and (now_ms + lease) or 0)
return now_ms
"""


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class _EveryTurn:
    """A background loop: `turn` every `every_s` seconds (a Redis failure waits for the next turn).

    Args:
        every_s: seconds between turns.
        sleep: waits between turns (injected in tests).
        name: the loop's task name, and its logs'.
    """

    def __init__(self, every_s: float, sleep: Callable[[float], Awaitable[None]], name: str) -> None:
        self._every_s = every_s
        self._sleep = sleep
        self._name = name
        self._task: asyncio.Task[None] | None = None

    async def turn(self) -> object:
        """One turn (raises `StateUnavailable` when Redis is out of reach)."""
        raise NotImplementedError

    def start(self) -> None:
        """Turn every `every_s` until `stop`."""
        self._task = asyncio.create_task(self._run(), name=self._name)

    async def _run(self) -> None:
        while True:
            try:
                await self.turn()
            except StateUnavailable as exc:
                log.debug("%s: Redis out of reach (%s)", self._name, exc.kind)
            await self._sleep(self._every_s)

    async def stop(self) -> None:
        """Stop turning."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


class IngressLease(_EveryTurn):
    """One ingress's liveness lease, renewed in the background.

    Args:
        redis: the ingress's client.
        channel: its reply channel (`keys.reply_channel`), the lease's field.
        lease_ms: the lease's life (ms, Redis `TIME`).
        every_s: seconds between renewals.
        sleep: waits between renewals (injected in tests).
    """

    def __init__(
        self,
        redis: Redis,
        channel: str,
        *,
        lease_ms: int = INGRESS_LEASE_MS,
        every_s: float = INGRESS_RENEW_S,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        super().__init__(every_s, sleep, "turnout-ingress-lease")
        self._redis = redis
        self._channel = channel
        self._lease_ms = lease_ms
        self._script = redis.register_script(_RENEW)

    async def renew(self, lease_ms: int | None = None) -> int:
        """Renew the lease now (`lease_ms`, default the lease's life; 0 ends it). Returns Redis `TIME` ms.

        Raises:
            StateUnavailable: Redis unreachable.
        """
        with state_errors():
            now_ms = await self._script(
                keys=[keys.INGRESS_LEASES],
                args=[self._channel, self._lease_ms if lease_ms is None else lease_ms],
            )
        return int(now_ms)

    async def turn(self) -> int:
        """Renew (`renew`)."""
        return await self.renew()

    async def stop(self) -> None:
        """Stop renewing and end the lease (best effort: a lease not ended runs out by itself)."""
        await super().stop()
        with contextlib.suppress(StateUnavailable, TimeoutError):
            async with asyncio.timeout(1.0):
                await self.renew(0)


class IngressWatch(_EveryTurn):
    """A worker's view of which ingresses are gone (`turnout.core.liveness.ingress_gone`).

    Args:
        redis: the worker's client.
        every_s: seconds between reads.
        sleep: waits between reads (injected in tests).

    Attributes:
        gone: the reply channels of the ingresses gone at the last read.
    """

    def __init__(
        self,
        redis: Redis,
        *,
        every_s: float = WATCH_EVERY_S,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        super().__init__(every_s, sleep, "turnout-ingress-watch")
        self._redis = redis
        self._read = redis.register_script(_READ)
        self.gone: frozenset[str] = frozenset()
        self._failed = False  # the last read failed
        self._last_ok_ms: int | None = None  # Redis TIME of the last successful read
        self._back_ms: int | None = None  # Redis TIME when the view came back after a cut

    async def turn(self) -> frozenset[str]:
        """Read (`refresh`)."""
        return await self.refresh()

    async def refresh(self) -> frozenset[str]:
        """Read the leases (and, for those past, who listens) and return the gone ingresses' channels.

        After a cut in this view (`turnout.core.liveness.view_came_back`) no ingress is gone for
        `BACK_GRACE_MS`: they lost Redis too.

        Raises:
            StateUnavailable: Redis unreachable (`gone` is left as it was).
        """
        try:
            now_ms, leases, listeners = await self._read_leases()
        except StateUnavailable:
            self._failed = True
            raise
        if view_came_back(self._failed, self._last_ok_ms, now_ms):
            self._back_ms = now_ms
        self._failed, self._last_ok_ms = False, now_ms
        self.gone = frozenset(c for c in leases if ingress_gone(leases[c], now_ms, listeners.get(c, 0), self._back_ms))
        return self.gone

    async def _read_leases(self) -> tuple[int, dict[str, int], dict[str, int]]:
        """Redis `TIME` ms, every lease (channel -> until, ms) and, for those past, their listeners.

        Raises:
            StateUnavailable: Redis unreachable.
        """
        with state_errors():
            now_ms, flat = await self._read(keys=[keys.INGRESS_LEASES])
            now_ms = int(now_ms)
            leases = {_text(flat[i]): int(flat[i + 1]) for i in range(0, len(flat), 2)}
            out = [channel for channel, until in leases.items() if lease_out(until, now_ms)]
            listeners: dict[str, int] = {}
            if out:
                listeners = {_text(c): int(n) for c, n in await self._redis.pubsub_numsub(*out)}
                stale = [channel for channel in out if forget(leases[channel], now_ms)]
                if stale:
                    await self._redis.hdel(keys.INGRESS_LEASES, *stale)  # type: ignore[misc]
        return now_ms, leases, {c: listeners.get(c, 0) for c in out}


__all__ = ["IngressLease", "IngressWatch"]
