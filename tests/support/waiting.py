"""Waiting on a real process (Redis, a server task) in a unit test without timing it.

A test that asserts how *fast* something happened fails on a loaded machine.
These helpers wait for a *condition* instead, bounded only by a generous
`within_s` that no healthy run comes near: the bound catches a hang, not a
slow scheduler.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

GENEROUS_S = 10.0
"""The default bound: far beyond any healthy wait, well inside the test timeout."""


async def eventually(
    condition: Callable[[], bool | Awaitable[bool]], within_s: float = GENEROUS_S, poll_s: float = 0.01
) -> None:
    """Poll `condition` (sync or async) until it holds.

    Raises:
        AssertionError: it did not hold within `within_s` seconds.
    """
    deadline = time.monotonic() + within_s
    while True:
        result = condition()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"condition did not hold within {within_s} s")
        await asyncio.sleep(poll_s)
