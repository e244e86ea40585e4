"""A worker's first connection to Redis: wait for it, however long it takes.

Owns: the start-up connect loop of `turnout worker`. arq's own pool gives up
after `conn_retries` (5) tries one second apart and the process dies with a
traceback; a worker started before its Redis (a fresh deployment, a Redis
restarting, a typo in the URL) should instead wait, as the ingress does,
with one log line per failed try naming the error, and start serving as soon
as Redis answers. SIGTERM / SIGINT during the wait stop it cleanly (arq
cancels the task that awaits here).

Must not import: FastAPI, httpx.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from turnout.state.errors import StateUnavailable, state_errors
from turnout.state.listen import Backoff

log = logging.getLogger("turnout.worker")

T = TypeVar("T")

START_BACKOFF = Backoff(base_s=0.25, cap_s=5.0)
"""Waits between start-up tries (seconds): 0.125–0.25 after the first failure, doubling to 2.5–5."""


async def connect_when_ready(
    connect: Callable[[], Awaitable[T]],
    *,
    where: str,
    rng: random.Random,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    backoff: Backoff = START_BACKOFF,
) -> T:
    """Await `connect()` until it succeeds; its result.

    Args:
        connect: one connection try (`PushWorker.open_pool`: a client that answered PING).
        where: the Redis named in the log lines (host:port, never a password).
        rng: the jitter's source (`backoff.delay_s` draw).
        sleep: awaited with each wait (seconds); tests pass a fake clock's.
        backoff: the wait after each failure in a row.

    Raises:
        asyncio.CancelledError: the worker was stopped while waiting.
        Anything `connect` raises other than a Redis or socket error
        (`turnout.state.errors.STATE_ERRORS`, retried).
    """
    failures = 0
    while True:
        try:
            with state_errors():  # refused, unresolved, timed out, a bad password, a Redis still loading
                result = await connect()
        except StateUnavailable as exc:
            failures += 1
            delay_s = backoff.delay_s(failures, rng.random())
            log.warning(
                "Redis at %s unreachable at start (%s: %s); try %d failed, next in %.1f s",
                where,
                exc.kind,
                exc,
                failures,
                delay_s,
            )
            await sleep(delay_s)
            continue
        if failures:
            log.info("Redis at %s answered after %d failed tries", where, failures)
        return result
