"""The worker's start gate: a few jobs at a time from their start to their first upstream call.

Owns: the order in which a worker's jobs reach the upstream.

Why: asyncio runs every ready task one step at a time, in turn. Jobs claimed
together (one pick claims every waiting job) therefore advance together, a
step each per turn of the event loop, and all reach the upstream at about the
same moment, once the CPU work of the whole group is done: the first job
claimed waits for the last. With an upstream of fixed latency they come back
together too, and the next group forms again: the jobs travel in waves, and
each job's latency carries the CPU time of its whole wave. With at most
`passes` jobs between their start and their first upstream call, the first
claimed reach the upstream first, one group of `passes` after another; the
answers come back spread out, and the waves do not form again. Measured with
the bench's 50 ms upstream at 50 concurrent requests (bench/README.md,
"The start gate"): about a fifth more requests per second.

A pass is given back (`leave`, the router's `paused` hook) just before the
job's first upstream call, once its attempt's started record is sent to
Redis, or before a wait between attempts; at the job's end; or after
`hold_s`, whichever comes first. The started record's send stays inside the
pass: given back before it, the gate did no better than none (measured:
"The start gate"), most likely because the jobs of one records batch
resume together and reach the upstream together again. The last bound
keeps a start phase that waits on something slow (a Redis that stopped
answering: the record's wait and a health read are bounded by their
timeouts) from holding the other jobs back: past `hold_s` the next job
starts, as it would with no gate.

Must not import: FastAPI, httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator

START_PASSES = 8
"""Jobs of one worker in their start phase at once (the default of `gateway.worker_start_passes`;
bench/README.md, "The start gate")."""

START_HOLD_S = 0.02
"""Longest one job holds its pass (seconds); past it the next job starts without waiting."""


class StartPass:
    """One job's place in the gate, given back once (`leave`): later calls do nothing."""

    __slots__ = ("_gate", "_timer")

    def __init__(self, gate: StartGate) -> None:
        self._gate: StartGate | None = gate
        self._timer = asyncio.get_running_loop().call_later(gate.hold_s, self.leave)  # the hold bound

    def leave(self) -> None:
        """Give the pass back (idempotent): the next waiting job starts."""
        gate, self._gate = self._gate, None
        if gate is None:
            return
        self._timer.cancel()
        gate._sem.release()


_PASS: contextvars.ContextVar[StartPass | None] = contextvars.ContextVar("turnout_start_pass", default=None)
"""The pass of the job running in this context (None outside a job, or once given back)."""


class StartGate:
    """Admits at most `passes` jobs at once into their start phase, oldest waiter first.

    Args:
        passes: jobs in their start phase at once (>= 1).
        hold_s: longest a job holds its pass (seconds, > 0; `START_HOLD_S`).

    Raises:
        ValueError: `passes` < 1 or `hold_s` <= 0.
    """

    def __init__(self, passes: int = START_PASSES, hold_s: float = START_HOLD_S) -> None:
        if passes < 1:
            raise ValueError(f"passes must be at least 1, got {passes}")
        if hold_s <= 0:
            raise ValueError(f"hold_s must be above 0 s, got {hold_s}")
        self.passes = passes
        self.hold_s = hold_s
        self._sem = asyncio.Semaphore(passes)  # asyncio's semaphore wakes waiters first in, first out

    @property
    def free(self) -> int:
        """Passes not held now."""
        return self._sem._value

    @contextlib.asynccontextmanager
    async def start(self) -> AsyncIterator[StartPass]:
        """Hold a pass for the job running in this task: wait for one, give it back on exit.

        Inside, `leave()` (or the pass's own `leave`) gives it back earlier.
        Cancellation while waiting takes no pass.
        """
        await self._sem.acquire()
        held = StartPass(self)
        token = _PASS.set(held)
        try:
            yield held
        finally:
            held.leave()
            _PASS.reset(token)


def leave() -> None:
    """Give back the pass of the job running in this context, if it holds one (else nothing)."""
    held = _PASS.get()
    if held is not None:
        held.leave()
