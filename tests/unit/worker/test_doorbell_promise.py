"""The worker's fair picks never claim more than its free slots between them.

The doorbell's pick waits for a ring with the worker's free slots promised to
it (`PushWorker._promised`); a scan's pick meanwhile gets only the slots not
promised, and the doorbell's next wait gets what the scan's pick left. The
store is a stand-in whose picks return when the test says, so every count is
read at a known moment (no clock, no Redis).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from arq.worker import func

from turnout.state.pickup_store import Picked
from turnout_worker.pickup import Claimed, PushWorker


async def _job(ctx: dict[str, Any]) -> None:  # never run: `_start` is replaced
    return None


class _Store:
    """Picks that answer when released, recording the free slots each asked for."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int]] = []
        self._answers: dict[str, asyncio.Queue[list[Picked]]] = {"ring": asyncio.Queue(), "pick": asyncio.Queue()}

    def answer(self, which: str, *job_ids: str) -> None:
        self._answers[which].put_nowait([Picked(j, b"0", b"job", 1) for j in job_ids])

    async def ring_and_pick(self, taken_key: str, timeout_s: int, free: int) -> tuple[int, list[Picked]]:
        self.asked.append(("ring", free))
        return 0, await self._answers["ring"].get()

    async def pick(self, free: int, rung: int = 0) -> tuple[int, list[Picked]]:
        self.asked.append(("pick", free))
        return 0, await self._answers["pick"].get()


@pytest.fixture
async def worker(monkeypatch: pytest.MonkeyPatch) -> PushWorker:
    w = PushWorker(functions=[func(_job, name="job")], max_jobs=4)
    w._store = _Store()  # type: ignore[assignment]

    async def start(job_id: str, score: Any, claimed: Claimed | None = None) -> None:
        await w.sem.acquire()
        w.job_counter += 1

    monkeypatch.setattr(w, "_start", start)
    return w


async def _turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_a_scan_during_the_doorbells_wait_claims_only_what_it_did_not_promise(worker: PushWorker) -> None:
    store: _Store = worker._store  # type: ignore[assignment]
    doorbell = asyncio.ensure_future(worker._answer_doorbell())
    try:
        await _turns()
        assert store.asked == [("ring", 4)] and worker._fair_free() == 0
        await worker.pick_fair()  # every free slot is promised to the doorbell's pick: no claim
        assert store.asked == [("ring", 4)]
        store.answer("ring", "j1")  # the ring's pick claims one job and the doorbell waits again
        await _turns()
        assert store.asked == [("ring", 4), ("ring", 3)] and worker.job_counter == 1
        assert worker._promised == 3
    finally:
        doorbell.cancel()
        await asyncio.gather(doorbell, return_exceptions=True)
    assert worker._promised == 0  # a cancelled wait gives its promise back


async def test_the_doorbell_waits_with_the_slots_a_scan_left_and_for_a_slot_when_none_is(worker: PushWorker) -> None:
    store: _Store = worker._store  # type: ignore[assignment]
    scan = asyncio.ensure_future(worker.pick_fair())
    await _turns()
    assert store.asked == [("pick", 4)]
    doorbell = asyncio.ensure_future(worker._answer_doorbell())
    try:
        await _turns()
        assert store.asked == [("pick", 4)]  # the scan's pick holds every slot: the doorbell waits for one
        store.answer("pick", "s1", "s2", "s3")
        await scan
        await _turns()
        assert store.asked == [("pick", 4), ("ring", 1)]  # woken when the scan's pick ended, with the slot it left
        store.answer("ring", "s4")
        await _turns()
        assert worker.job_counter == 4 and worker._fair_free() == 0
        assert store.asked == [("pick", 4), ("ring", 1)]  # no free slot: no wait on the doorbell
    finally:
        doorbell.cancel()
        await asyncio.gather(doorbell, return_exceptions=True)
