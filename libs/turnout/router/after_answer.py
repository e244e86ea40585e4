"""Bookkeeping that waits until the client's answer is handed over.

Owns: `answer_first`, the scope a worker puts around a job, and `later`, by
which the router hands it the bookkeeping of a plain success: the attempt's
ended record, metrics, spend and span, and the breaker's success count.
Nothing of the answer depends on them, and the breaker counts a plain
success (not a probe's, SPEC §5) in memory and writes it in a quiet window
anyway (`turnout.health.writes`); the attempt record keeps the duration and
the span the end time of the attempt itself (`ended_at_ns`).

Why: on the queued path the answer's delivery is what the ingress, Redis and
the client wait for, while the worker's core is idle once it is sent. The
bookkeeping done before the delivery was on that path; done after it, it
runs beside the ingress's part of the request (bench/README.md, "The
answer before the bookkeeping").

Outside a scope (the ingress's streams, tests, tools) `later` says no and
the router does the work in place, as before. Inside one, every piece handed
over runs when the scope ends, in order, however the block ends (an error or
a cancellation too); a piece that raises is logged and the next still runs,
and a cancellation that comes while the pieces run stops the one it
interrupts, while the rest run in a task of their own.
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

log = logging.getLogger("turnout.router")

_Work = Callable[[], Awaitable[None]]


class _Scope:
    """One `answer_first` block: its clock and the work handed over in it, with hand-over times."""

    __slots__ = ("clock_ns", "pending")

    def __init__(self, clock_ns: Callable[[], int]) -> None:
        self.clock_ns = clock_ns
        self.pending: list[tuple[int, _Work]] = []


_SCOPE: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar("turnout_after_answer", default=None)
"""The scope of this context, if any."""

_ENDED_AT_NS: contextvars.ContextVar[int | None] = contextvars.ContextVar("turnout_ended_at_ns", default=None)
"""While a piece runs: the wall time (epoch ns) at which it was handed over."""


def later(work: _Work) -> bool:
    """Hand `work` (a coroutine function of no arguments) to the scope of this context, to run
    when it ends. False, and nothing kept, outside a scope: the caller runs it now."""
    scope = _SCOPE.get()
    if scope is None:
        return False
    scope.pending.append((scope.clock_ns(), work))
    return True


def ended_at_ns() -> int | None:
    """Inside a piece of work handed over by `later`: the wall time (epoch ns) it was handed
    over, which is when the thing it records ended. None anywhere else (now is the end)."""
    return _ENDED_AT_NS.get()


@contextlib.asynccontextmanager
async def answer_first(clock_ns: Callable[[], int] = time.time_ns) -> AsyncIterator[None]:
    """Run the block, then the bookkeeping `later` was handed inside it (module doc).

    Args:
        clock_ns: wall clock (epoch ns) of the hand-over times (`ended_at_ns`).

    A scope inside a scope keeps its own work (it runs at the inner end).
    """
    scope = _Scope(clock_ns)
    token = _SCOPE.set(scope)
    try:
        yield
    finally:
        _SCOPE.reset(token)
        await _run(scope.pending)


_RUNNING: set[asyncio.Future[None]] = set()
"""Bookkeeping moved to a task by a cancellation (a reference each, so none is collected before it ends)."""


async def _run(pending: list[tuple[int, _Work]]) -> None:
    """Run each piece in order with its hand-over time in context, logging what one raises.

    Cancelled while a piece runs: that piece stops there, the rest go on in a
    task of their own, and the cancellation goes on.
    """
    while pending:
        at_ns, work = pending.pop(0)
        token = _ENDED_AT_NS.set(at_ns)
        try:
            await work()
        except asyncio.CancelledError:
            if pending:
                task = asyncio.ensure_future(_run(list(pending)))
                _RUNNING.add(task)
                task.add_done_callback(_RUNNING.discard)
                pending.clear()
            raise
        except Exception:
            log.exception("bookkeeping after the answer failed")
        finally:
            _ENDED_AT_NS.reset(token)
