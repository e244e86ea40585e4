"""One pub/sub loop for every long-lived subscription: reconnect with jittered backoff.

Owns: subscribing a client to channels, handing each message to the caller,
and — when Redis is lost — closing the subscription, waiting a jittered
exponential backoff and subscribing again, forever (or until `stop`). Every
listener of the fleet (the ingress's result listener, the tenant directory's
watch, a worker's doorbell) runs through `listen_forever`, so they share one
reconnect policy. The RNG and the sleep are injected (tests drive them).
Must not import: services, FastAPI, httpx.

Backoff (after the n-th failure in a row, n = 0, 1, ...): the ceiling is
`min(cap_s, base_s * 2**n)` and the delay is drawn uniformly from
[ceiling / 2, ceiling] ("equal jitter": never a hot loop, and listeners that
lost Redis together do not come back in step). A successful subscription
resets n to 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from turnout.state.errors import STATE_ERRORS, StateUnavailable, outage_kind

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger("turnout.listen")

_LOST: tuple[type[BaseException], ...] = (StateUnavailable, *STATE_ERRORS)

Message = dict[str, Any]
"""A redis-py pub/sub message (`type`, `channel`, `data`, ...)."""


class Backoff(msgspec.Struct, frozen=True):
    """Reconnect backoff bounds, in seconds.

    Attributes:
        base_s: the ceiling after the first failure.
        cap_s: the largest ceiling.
    """

    base_s: float = 0.05
    cap_s: float = 1.0

    def delay_s(self, failures: int, draw: float) -> float:
        """Seconds to wait after `failures` (>= 1) failures in a row, for a
        uniform `draw` in [0, 1]: within [ceiling / 2, ceiling], ceiling =
        `min(cap_s, base_s * 2**(failures - 1))`."""
        ceiling = min(self.cap_s, self.base_s * 2.0 ** min(failures - 1, 60))
        return ceiling / 2 + ceiling / 2 * draw


async def listen_forever(
    redis: Redis,
    channels: Sequence[str],
    on_message: Callable[[Message | None], Awaitable[None]],
    *,
    name: str,
    rng: random.Random,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    backoff: Backoff = Backoff(),
    on_subscribed: Callable[[bool], Awaitable[None]] | None = None,
    idle_s: float | None = None,
    stop: asyncio.Event | None = None,
    also_lost: tuple[type[Exception], ...] = (),
) -> None:
    """Subscribe `redis` to `channels` and hand every message to `on_message`,
    reconnecting after a Redis loss, until `stop` is set (or the task is cancelled).

    Args:
        redis: a client without a socket read timeout (an idle channel is normal).
        channels: the channels to subscribe to.
        on_message: awaited with each message (subscribe confirmations are
            skipped); with `idle_s`, also with None after `idle_s` seconds
            without one.
        name: what the listener is, for its log lines.
        rng: draws the backoff jitter.
        sleep: waits the backoff (seconds).
        backoff: the backoff bounds.
        on_subscribed: awaited after each successful subscription, with True
            when it is not the first try (catch up on what was missed).
        idle_s: seconds to wait for a message before calling
            `on_message(None)`; None waits for messages only.
        stop: when set, the loop returns (checked before each subscription
            and after each message or idle wake).
        also_lost: more exceptions treated like a lost Redis (logged, retried
            after the backoff), e.g. a write race the next read resolves.

    Losing Redis (a `StateUnavailable`, one of `STATE_ERRORS` or of `also_lost`
    raised by the subscription, `on_subscribed` or `on_message`) is logged and retried after
    the backoff; any other exception ends the loop and propagates.
    """
    lost = (*_LOST, *also_lost)
    failures = 0
    tried = False
    while stop is None or not stop.is_set():
        pubsub = redis.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(*channels)
            if on_subscribed is not None:
                await on_subscribed(tried)
            tried, failures = True, 0
            while stop is None or not stop.is_set():
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=idle_s)
                if message is None and idle_s is None:
                    continue
                if message is None or message.get("type") == "message":
                    await on_message(message)
        except lost as exc:
            tried, failures = True, failures + 1
            delay = backoff.delay_s(failures, rng.random())
            log.warning("%s lost Redis (%s); reconnecting in %.2f s", name, outage_kind(exc), delay)
            await sleep(delay)
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()  # type: ignore[no-untyped-call]
