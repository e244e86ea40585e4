"""Following a document kept in Redis: a subscription plus a periodic version re-check.

Owns: the one loop the tenant directory (`turnout.tenancy.directory`) and
the catalog (`turnout.catalog.watch`) keep their snapshots fresh with:
subscribe to the invalidation channel, run a one-time step (the file's
bootstrap), refresh, tell the caller it is ready, then refresh on every
message and at least every `poll_s` (a dropped message is caught by the
re-check). It runs on `turnout.state.listen.listen_forever`: a lost Redis is
logged and retried with its jittered backoff, and the caller keeps serving
its last snapshot meanwhile. With an `EpochTracker`, a resubscription to a
Redis that lost its data (`turnout.state.epoch`) runs the one-time step again
(the file re-seeds what it owns) and then `on_new_epoch`, before the refresh.
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable

from redis.asyncio import Redis

from turnout.state.epoch import EpochTracker
from turnout.state.listen import Message, listen_forever

log = logging.getLogger("turnout.state")


async def follow(
    listen_redis: Redis,
    channel: str,
    *,
    refresh: Callable[[], Awaitable[object]],
    ready: asyncio.Event,
    poll_s: float,
    what: str,
    first: Callable[[], Awaitable[object]] | None = None,
    retry_on: tuple[type[Exception], ...] = (),
    rng: random.Random | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    epoch: EpochTracker | None = None,
    on_new_epoch: Callable[[], Awaitable[object]] | None = None,
) -> None:
    """Run until cancelled (see module doc).

    Args:
        listen_redis: a client without a socket timeout (pub/sub).
        channel: the invalidation channel.
        refresh: re-reads the document when its version moved.
        ready: set after the first successful refresh.
        poll_s: seconds between re-checks when no message comes.
        what: the followed document (`tenancy`, `catalog`), for the log line of a lost Redis.
        first: run once, after subscribing and before the first refresh.
        retry_on: more exceptions treated as a lost Redis (retried).
        rng: draws the reconnect jitter (default: a fresh `random.Random`).
        sleep: waits the reconnect backoff (seconds).
        epoch: the process's view of the Redis epoch (None: data loss is not looked for).
        on_new_epoch: run after `first` when the epoch moved (e.g. the persistence re-check).

    Raises:
        Any other exception of `first` or `refresh` (the loop ends).
    """
    pending = first

    async def subscribed(reconnected: bool) -> None:
        nonlocal pending
        if pending is not None:
            await pending()
            pending = None
        if epoch is not None and await epoch.moved(listen_redis):
            log.warning("%s: Redis came back without its data (a new epoch); writing what the file owns again", what)
            if first is not None:
                await first()
            if on_new_epoch is not None:
                await on_new_epoch()
        await refresh()
        ready.set()

    async def wake(message: Message | None) -> None:
        await refresh()

    await listen_forever(
        listen_redis,
        [channel],
        wake,
        name=f"{what} (keeping the last snapshot)",
        rng=rng or random.Random(),
        sleep=sleep,
        on_subscribed=subscribed,
        idle_s=poll_s,
        also_lost=retry_on,
    )


async def wait_ready(ready: asyncio.Event, wait_s: float) -> bool:
    """Wait up to `wait_s` seconds for `ready`; True when it is set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(ready.wait(), wait_s)
    return ready.is_set()


async def stop_task(task: asyncio.Task[None] | None) -> None:
    """Cancel a following task (None: never started) and wait for it to end."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
