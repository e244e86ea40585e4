"""A claimed job runs from its claim alone, and its end is written once (`turnout_worker.runner`).

The claim (`Claimed`) carries the job's envelope, its try and Redis's clock: the run reads
nothing more from Redis. Its end: nothing after a delivered answer, the job dropped after a
failure, a timeout, an abort, too many tries or an expired envelope, and given back (its lease
deleted) when the worker's stop cut it. The store is a stand-in that records each call.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from arq.worker import func

from support.jobs import job_payload
from turnout.core.kept_answer import START_LEASE_S
from turnout.state.errors import StateUnavailable
from turnout.state.jobs import encode_job
from turnout_worker.pickup import PushWorker
from turnout_worker.runner import Claimed

SEEN: list[dict[str, Any]] = []


async def _job(ctx: dict[str, Any], raw: bytes) -> str:
    SEEN.append(ctx)
    behaviour = ctx["worker"].behaviour
    if behaviour == "deliver":
        await ctx["worker"].deliver(ctx["job_id"], "reply", b"answer", 60)
    elif behaviour == "fail":
        raise RuntimeError("a bug")
    elif behaviour == "hang":
        await asyncio.sleep(60)
    return "done"


class _Store:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def deliver(self, job_id: str, reply_to: str, result: bytes, ttl_s: int, release: object = ()) -> None:
        self.calls.append(("deliver", job_id))

    async def drop(self, job_id: str) -> None:
        self.calls.append(("drop", job_id))

    async def release(self, job_id: str) -> None:
        self.calls.append(("release", job_id))

    async def now_ms(self) -> int:
        raise AssertionError("the claim's clock serves: no round trip")


def _worker(behaviour: str, max_tries: int = 3) -> tuple[PushWorker, _Store]:
    worker = PushWorker(
        functions=[func(_job, name="chat_completion", timeout=5, max_tries=max_tries)],
        max_jobs=2,
    )
    store = _Store()
    worker._store = store  # type: ignore[assignment]
    worker.ctx["worker"] = worker
    worker.behaviour = behaviour  # type: ignore[attr-defined]
    return worker, store


def _claim(job_try: int = 1, job: bytes | None = b"") -> Claimed:
    envelope = encode_job(job_payload("j1", 1e10), 1_700_000_000_000) if job == b"" else job
    return Claimed(envelope, job_try, 1_700_000_000_500)


async def _run(worker: PushWorker, claimed: Claimed) -> None:
    await worker._start("j1", b"1700000000000", claimed)
    await asyncio.gather(*worker.tasks.values())


async def test_the_function_gets_arqs_job_context_from_the_claim_and_a_delivered_job_writes_no_end() -> None:
    SEEN.clear()
    worker, store = _worker("deliver")
    await _run(worker, _claim(job_try=2))
    (ctx,) = SEEN
    assert (ctx["job_id"], ctx["job_try"], ctx["score"]) == ("j1", 2, 1_700_000_000_000)
    assert ctx["enqueue_time"].timestamp() == 1_700_000_000.0
    assert store.calls == [("deliver", "j1")]
    assert (worker.job_counter, worker.sem._value, worker.tasks) == (0, 2, {})


async def test_the_claims_clock_is_redis_time_moved_on_locally() -> None:
    worker, _ = _worker("deliver")
    token_claim = _claim()
    seen: list[int] = []

    async def read_clock(ctx: dict[str, Any], raw: bytes) -> None:
        seen.append(await worker.store_now_ms())

    worker.functions["chat_completion"] = func(read_clock, name="chat_completion")
    await _run(worker, token_claim)
    assert seen and 1_700_000_000_500 <= seen[0] < 1_700_000_060_000


@pytest.mark.parametrize(
    ("behaviour", "claimed", "ran"),
    [
        ("return", _claim(), True),  # ended without an answer (skipped): it leaves the queue
        ("fail", _claim(), True),
        ("deliver", _claim(job_try=4), False),  # past max_tries: not run again
        ("deliver", _claim(job=None), False),  # its envelope expired
        ("deliver", _claim(job=b"\xc1 not msgpack"), False),
    ],
)
async def test_a_job_that_delivered_nothing_is_dropped(behaviour: str, claimed: Claimed, ran: bool) -> None:
    SEEN.clear()
    worker, store = _worker(behaviour)
    claimed.renewed_s = time.monotonic()  # claimed now (built at collection: its start lease would have lapsed)
    await _run(worker, claimed)
    assert store.calls == [("drop", "j1")]
    assert bool(SEEN) == ran


async def test_a_claim_whose_start_lease_lapsed_runs_nothing_and_writes_no_end() -> None:
    SEEN.clear()
    worker, store = _worker("deliver")
    claimed = _claim()
    claimed.renewed_s -= START_LEASE_S  # stalled (SIGSTOP) since the claim: another worker may hold it
    await _run(worker, claimed)
    assert (SEEN, store.calls) == ([], [])


async def test_a_job_whose_client_left_is_dropped_and_one_cut_by_the_stop_is_given_back() -> None:
    worker, store = _worker("hang")
    await worker._start("j1", 0, _claim())
    while "j1" not in worker.job_tasks:
        await asyncio.sleep(0)
    worker._cancel("j1")  # the client left
    await asyncio.gather(*worker.tasks.values())
    assert store.calls == [("drop", "j1")]

    store.calls.clear()
    await worker._start("j1", 0, _claim())
    while "j1" not in worker.job_tasks:
        await asyncio.sleep(0)
    worker.tasks["j1"].cancel()  # the worker stops
    await asyncio.gather(*worker.tasks.values(), return_exceptions=True)
    assert store.calls == [("release", "j1")]
    assert (worker.job_counter, worker.sem._value) == (0, 2)


class _Flaky(_Store):
    """A store whose first `failures` deliveries find Redis out of reach."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    async def deliver(self, job_id: str, reply_to: str, result: bytes, ttl_s: int, release: object = ()) -> None:
        self.calls.append(("deliver", job_id))
        if self.failures > 0:
            self.failures -= 1
            raise StateUnavailable("cut") from ConnectionError("cut")


async def test_an_answer_redis_did_not_take_is_kept_and_delivered_once_redis_is_back() -> None:
    worker, _ = _worker("deliver")
    store = _Flaky(failures=3)
    worker._store = store  # type: ignore[assignment]
    await _run(worker, _claim())
    assert store.calls == [("deliver", "j1")] * 4  # three failed, the fourth took it: no drop, no release
    assert worker._kept == {} and worker.claims == {}


async def test_a_kept_answer_renews_the_full_lease_and_an_unstarted_claim_the_short_one() -> None:
    worker, _ = _worker("deliver")
    store = _Flaky(failures=10**6)
    worker._store = store  # type: ignore[assignment]
    waiting = Claimed(None, 1, 0)
    worker.claims["waiting"] = waiting  # claimed, no upstream call yet
    await worker._start("j1", b"1700000000000", _claim())
    await asyncio.sleep(0.2)
    assert worker.leases_ms(10.0) == {"j1": 10_000, "waiting": int(START_LEASE_S * 1000)}
    for task in worker.tasks.values():
        task.cancel()
    await asyncio.gather(*worker.tasks.values(), return_exceptions=True)
