"""`PushWorker.sleep_off_slot`: a long wait lends the job's slot; the slot count stays exact."""

from __future__ import annotations

import asyncio
from typing import Any

from arq.worker import func

from turnout_worker.pickup import PushWorker


async def _job(ctx: dict[str, Any]) -> None:  # never run: the worker is not started
    return None


def _worker(max_jobs: int) -> PushWorker:
    return PushWorker(functions=[func(_job, name="job")], max_jobs=max_jobs)


async def _hold_slot(worker: PushWorker) -> None:
    await worker.sem.acquire()
    worker.job_counter += 1


async def test_slot_semaphore_admits_exactly_max_jobs() -> None:
    worker = _worker(2)
    await _hold_slot(worker)
    await _hold_slot(worker)
    assert worker.sem.locked()


async def test_long_wait_lends_the_slot_and_a_cancelled_one_returns_none() -> None:
    worker = _worker(2)
    await _hold_slot(worker)
    waiting = asyncio.ensure_future(worker.sleep_off_slot(60.0))
    await asyncio.sleep(0)
    assert (worker.job_counter, worker.sem._value) == (0, 2)  # lent: both slots free
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    worker._ended()  # the cancelled job ends without a slot: nothing to release
    assert (worker.job_counter, worker.sem._value) == (0, 2)


async def test_short_wait_keeps_the_slot() -> None:
    worker = _worker(2)
    await _hold_slot(worker)
    waiting = asyncio.ensure_future(worker.sleep_off_slot(0.5))
    await asyncio.sleep(0)
    assert (worker.job_counter, worker.sem._value) == (1, 1)
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    worker._ended()
    assert (worker.job_counter, worker.sem._value) == (0, 2)
