"""`turnout_worker.connect.connect_when_ready`: a worker waits for Redis at start (fake clock, no real time)."""

from __future__ import annotations

import asyncio
import logging
import random

import pytest
from redis.exceptions import AuthenticationError, ConnectionError, ResponseError

from turnout_worker.connect import START_BACKOFF, connect_when_ready


class Tries:
    """A connect that fails with `errors` in turn, then answers "pool"; records the fake sleeps."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.slept: list[float] = []

    async def connect(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "pool"

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def _run(tries: Tries, seed: int = 7) -> str:
    return asyncio.run(
        connect_when_ready(tries.connect, where="127.0.0.1:6379", rng=random.Random(seed), sleep=tries.sleep)
    )


def test_first_try_answers_without_waiting() -> None:
    tries = Tries()
    assert _run(tries) == "pool" and tries.calls == 1 and tries.slept == []


def test_waits_through_every_kind_of_unreachable_redis_then_returns_the_pool(caplog: pytest.LogCaptureFixture) -> None:
    errors = [
        ConnectionRefusedError(111, "Connection refused"),
        ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused."),
        AuthenticationError("invalid username-password pair"),
        ResponseError("LOADING Redis is loading the dataset in memory"),
        TimeoutError(),
        OSError(-2, "Name or service not known"),
    ]
    tries = Tries(*errors)
    with caplog.at_level(logging.INFO, logger="turnout.worker"):
        assert _run(tries) == "pool"
    assert tries.calls == len(errors) + 1, "far more tries than arq's five would allow, had they been needed"
    assert len(tries.slept) == len(errors)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == len(errors), "one line per failed try"
    assert warnings[0].startswith("Redis at 127.0.0.1:6379 unreachable at start (ConnectionRefusedError:")
    assert "try 6 failed" in warnings[-1]
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.INFO] == [
        "Redis at 127.0.0.1:6379 answered after 6 failed tries"
    ]


def test_waits_follow_the_start_backoff_jittered_and_capped() -> None:
    tries = Tries(*[ConnectionRefusedError(111, "refused") for _ in range(40)])
    assert _run(tries, seed=3) == "pool"
    for failures, waited in enumerate(tries.slept, start=1):
        ceiling = min(START_BACKOFF.cap_s, START_BACKOFF.base_s * 2 ** (failures - 1))
        assert ceiling / 2 <= waited <= ceiling, (failures, waited)
    assert max(tries.slept) <= START_BACKOFF.cap_s, "a long outage is retried at most every cap_s"


def test_an_error_that_is_not_about_reaching_redis_is_raised_at_once() -> None:
    tries = Tries(ValueError("bad serializer"))
    with pytest.raises(ValueError, match="bad serializer"):
        _run(tries)
    assert tries.calls == 1 and tries.slept == []


def test_a_stop_during_the_wait_ends_it() -> None:
    async def scenario() -> None:
        async def never(_seconds: float) -> None:
            await asyncio.Event().wait()

        async def refused() -> str:
            raise ConnectionRefusedError(111, "refused")

        task = asyncio.create_task(connect_when_ready(refused, where="r:1", rng=random.Random(1), sleep=never))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
