"""Run a request's work unless its client leaves first.

Owns: the race between the work (a queued job, or the streaming loop up to
its commit point) and the client's `http.disconnect`. When the client goes,
the work is cancelled (its in-flight upstream call with it) before returning,
unless the work is to outlive its client: a queued job whose request holds an
`Idempotency-Key` runs on to its end, so its stored result answers the
retry the client announced by sending a key (README "Reliability").
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response

T = TypeVar("T")


async def _disconnected(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


class Outlived(Response):
    """The answer (499, never sent: the client is gone) of a request whose `work` runs on after its
    client left (`outlive_client`). The limiter keeps the request's concurrency slots until `work`
    ends (`turnout_ingress.limits.admission.Limiter.answer`), so leaving early frees no slot a running job holds."""

    def __init__(self, work: asyncio.Future[Any]) -> None:
        super().__init__(status_code=499)
        self.work = work


_OUTLIVING: set[asyncio.Future[Any]] = set()
"""Work running on after its client left (`outlive_client`): held here so it is not garbage-collected."""


async def unless_client_leaves(
    request: Request, work: Coroutine[Any, Any, T] | asyncio.Future[T], *, outlive_client: bool = False
) -> asyncio.Future[T] | None:
    """Run `work`; return its finished task, or None when the client left first.

    The body must have been read already (the next message is then the
    disconnect, if any). A None return means `work` was cancelled and has
    finished unwinding; with `outlive_client`, that it runs on in the
    background to its own end (its result, or error, is then nobody's).
    """
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((task, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if task.done():
        return task
    if outlive_client:
        _OUTLIVING.add(task)
        task.add_done_callback(_settled)
        return None
    await _cancelled(task)
    return None


def _settled(task: asyncio.Future[Any]) -> None:
    """The end of work that outlived its client: released, its error retrieved (nobody reads it)."""
    _OUTLIVING.discard(task)
    if not task.cancelled():
        task.exception()


RECANCEL_S = 0.1
"""How long a cancelled piece of work may go on before it is cancelled again (seconds)."""


async def _cancelled(task: asyncio.Future[Any]) -> None:
    """Cancel `task` and wait until it has finished unwinding.

    A cancel can be lost: on Python 3.11, `asyncio.wait_for` (redis-py runs each
    command's write inside one when a socket timeout is set) returns its inner
    result when the cancel lands just as that result arrives, and the work goes
    on as if nothing happened. Here the work (a queued job's wait, polling for
    its result) then ran to its deadline and the job was never withdrawn. So the
    cancel is sent again every `RECANCEL_S` until the task is done.
    """
    try:
        while not task.done():
            task.cancel()
            await asyncio.wait((task,), timeout=RECANCEL_S)
    except asyncio.CancelledError:  # this request's own task is cancelled (shutdown): the work goes too
        task.cancel()
        raise
    if not task.cancelled():
        task.exception()  # retrieved: the client is gone, nobody reads it
