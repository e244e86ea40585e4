"""A job picked with arq's opening reads runs arq's `run_job` without arq's opening transaction.

`PushWorker.run_job` puts the claim (`Claimed`) in the job's context; the
worker's `pool`, read there, answers arq's one opening pipeline (GET job;
INCR, EXPIRE retry) from the claim, and is the real pool for everything
after, and for a job claimed without those reads (arq's own scan).
"""

from __future__ import annotations

from typing import Any

import pytest
from arq.connections import RedisSettings
from arq.worker import func

from turnout_worker.pickup import _CLAIMED, Claimed, PushWorker


async def _job(ctx: dict[str, Any]) -> None:
    return None


class _Pipeline:
    """A stand-in for a real pipeline: records that it was used."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    async def __aenter__(self) -> _Pipeline:
        self.calls.append("pipeline")
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class _Pool:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def pipeline(self, transaction: bool = True) -> _Pipeline:
        return _Pipeline(self.calls)


def _worker() -> PushWorker:
    return PushWorker(functions=[func(_job, name="job")], redis_settings=RedisSettings(), max_jobs=2)


async def test_the_claim_answers_arqs_opening_transaction_once_then_the_real_pool_serves() -> None:
    worker = _worker()
    real = _Pool()
    worker._pool = real  # type: ignore[assignment]
    claimed = Claimed(b"job-bytes", 2, 1_700_000_000_000)
    token = _CLAIMED.set(claimed)
    try:
        async with worker.pool.pipeline(transaction=True) as pipe:
            pipe.get("arq:job:j")
            pipe.incr("arq:retry:j")
            pipe.expire("arq:retry:j", 88400)
            assert await pipe.execute() == [b"job-bytes", 2, True]
        assert worker.pool is real  # type: ignore[comparison-overlap]  # everything after the opening reads is Redis's
        assert real.calls == []
        assert await worker.store_now_ms() >= 1_700_000_000_000  # the claim's clock, moved on locally
    finally:
        _CLAIMED.reset(token)


async def test_without_a_claim_the_pool_is_the_real_one() -> None:
    worker = _worker()
    real = _Pool()
    worker._pool = real  # type: ignore[assignment]
    assert worker.pool is real  # type: ignore[comparison-overlap]


@pytest.mark.parametrize("job", [b"x", None])
def test_a_claim_keeps_what_was_read(job: bytes | None) -> None:
    claimed = Claimed(job, 1, 5)
    assert (claimed.job, claimed.job_try, claimed.now_ms, claimed.used) == (job, 1, 5, False)
