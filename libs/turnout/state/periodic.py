"""A Redis chore repeated on a timer: the clock check, a worker's heartbeat, the ingress's fleet view.

Owns: running one async step now and every `interval_s` as a task of the
running loop, a Redis error skipping that round (logged at debug) instead of
ending the task, and a clean stop.
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from turnout.state.errors import STATE_ERRORS, StateUnavailable, outage_kind

log = logging.getLogger("turnout.periodic")

_SKIPPED: tuple[type[BaseException], ...] = (StateUnavailable, *STATE_ERRORS)


class Periodic:
    """Runs `step` now and every `interval_s` seconds until stopped.

    Args:
        name: the task's name (shown in logs and task dumps).
        step: the chore; a `StateUnavailable` (or a Redis / socket error) it raises skips one round.
        interval_s: seconds between two rounds.
        sleep: the wait between rounds; injected in tests.
    """

    def __init__(
        self,
        name: str,
        step: Callable[[], Awaitable[object]],
        interval_s: float,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._name = name
        self._step = step
        self._interval_s = interval_s
        self._sleep = sleep
        self._task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        """The loop itself (until cancelled)."""
        while True:
            try:
                await self._step()
            except _SKIPPED as exc:
                log.debug("%s skipped a round (%s)", self._name, outage_kind(exc))
            await self._sleep(self._interval_s)

    def start(self) -> None:
        """Start `run` as a task of the running loop."""
        self._task = asyncio.create_task(self.run(), name=self._name)

    async def stop(self) -> None:
        """Cancel the task and wait for it (no-op if not started)."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
