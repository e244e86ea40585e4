"""A background flusher: writes what a process buffered for Redis, periodically.

Owns: the task that calls an async `flush` every `interval_s` (or as soon as
it is woken), and the final flush when it stops. Used by the attempt-record
writer and the spend ledger.
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable


class Flusher:
    """Calls `flush` every `interval_s` seconds, or at once after `wake()`.

    Args:
        flush: writes what is buffered (must not raise on a Redis outage).
        interval_s: longest a buffered item waits.
        name: the task's name.
    """

    def __init__(self, flush: Callable[[], Awaitable[object]], *, interval_s: float, name: str) -> None:
        self._flush = flush
        self._interval_s = interval_s
        self._name = name
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        """True between `start` and `stop`."""
        return self._task is not None

    def wake(self) -> None:
        """Flush now rather than at the next interval."""
        self._wake.set()

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._interval_s):  # not `wait_for`: no task per wait, woken in one step
                    await self._wake.wait()
            self._wake.clear()
            await self._flush()

    def start(self) -> None:
        """Start on the running loop (once)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=self._name)

    async def stop(self, timeout_s: float) -> None:
        """Stop, then flush once more (up to `timeout_s` seconds)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._flush(), timeout_s)
