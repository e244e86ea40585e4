"""Following a document kept in Redis: a subscription plus a periodic version re-check.

Owns: the one loop the tenant directory (`turnout.directory`) and the
catalog (`turnout.catalog.watch`) keep their snapshots fresh with: subscribe
to the invalidation channel, run a one-time step (the file's bootstrap),
refresh, tell the caller it is ready, then refresh on every message and at
least every `poll_s` (a dropped message is caught by the re-check). A lost
Redis is logged and retried with a capped backoff (50 ms doubling to 1 s);
the caller keeps serving its last snapshot meanwhile.
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from redis.asyncio import Redis
from redis.exceptions import RedisError


async def follow(
    listen_redis: Redis, channel: str, *, refresh: Callable[[], Awaitable[object]], ready: asyncio.Event,
    poll_s: float, log: logging.Logger, what: str, first: Callable[[], Awaitable[object]] | None = None,
    retry_on: tuple[type[Exception], ...] = (),
) -> None:
    """Run until cancelled (see module doc).

    Args:
        listen_redis: a client without a socket timeout (pub/sub).
        channel: the invalidation channel.
        refresh: re-reads the document when its version moved.
        ready: set after the first successful refresh.
        poll_s: seconds between re-checks when no message comes.
        log / what: where and under which name (`tenancy`, `catalog`) a lost Redis is logged.
        first: run once, after subscribing and before the first refresh.
        retry_on: more exceptions treated as a lost Redis (retried).

    Raises:
        Any other exception of `first` or `refresh` (the loop ends).
    """
    lost: tuple[type[Exception], ...] = (RedisError, OSError, *retry_on)
    backoff_s = 0.05
    while True:
        pubsub = listen_redis.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(channel)
            if first is not None:
                await first()
                first = None
            await refresh()
            ready.set()
            backoff_s = 0.05
            while True:
                await pubsub.get_message(timeout=poll_s)
                await refresh()
        except asyncio.CancelledError:
            raise
        except lost as exc:
            log.warning("%s: lost Redis (%s); keeping the last snapshot, reconnecting", what, type(exc).__name__)
            await asyncio.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, 1.0)
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()  # type: ignore[no-untyped-call]


async def wait_ready(ready: asyncio.Event, wait_s: float) -> bool:
    """Wait up to `wait_s` seconds for `ready`; True when it is set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(ready.wait(), wait_s)
    return ready.is_set()


async def stop_task(task: "asyncio.Task[None] | None") -> None:
    """Cancel a following task (None: never started) and wait for it to end."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
