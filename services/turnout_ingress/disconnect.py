"""Run a request's work unless its client leaves first.

Owns: the race between the work (a queued job, or the streaming loop up to
its commit point) and the client's `http.disconnect`. When the client goes,
the work is cancelled (its in-flight upstream call with it) before returning.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from starlette.requests import Request

T = TypeVar("T")


async def _disconnected(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def unless_client_leaves(request: Request, work: Coroutine[Any, Any, T]) -> asyncio.Future[T] | None:
    """Run `work`; return its finished task, or None when the client left first.

    The body must have been read already (the next message is then the
    disconnect, if any). A None return means `work` was cancelled and has
    finished unwinding.
    """
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((task, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if task.done():
        return task
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return None
