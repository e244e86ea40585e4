"""A request's work is stopped when its client leaves, even when a cancel is lost, unless it is to outlive its client (`turnout_ingress.serving.disconnect`)."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request

from turnout_ingress.serving.disconnect import unless_client_leaves


def _request(leaves: asyncio.Event) -> Request:
    async def receive() -> dict[str, Any]:
        await leaves.wait()
        return {"type": "http.disconnect"}

    return Request({"type": "http", "method": "POST", "path": "/", "headers": []}, receive)


async def test_work_that_finishes_first_is_returned() -> None:
    async def work() -> str:
        return "answer"

    done = await unless_client_leaves(_request(asyncio.Event()), work())
    assert done is not None and done.result() == "answer"


async def test_a_client_that_leaves_cancels_the_work() -> None:
    leaves, started, unwound = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def work() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            unwound.set()
        return "never"

    async def leave_once_started() -> None:
        await started.wait()
        leaves.set()

    leaving = asyncio.ensure_future(leave_once_started())
    assert await unless_client_leaves(_request(leaves), work()) is None
    assert unwound.is_set()
    await leaving


async def test_a_cancel_the_work_swallows_is_sent_again_until_it_stops() -> None:
    """Python 3.11's `wait_for` returns its inner result when a cancel lands as that result
    arrives (redis-py sends each command inside one): the work goes on. Modelled here by work
    that swallows the first two cancels; the client's leaving must still end it."""
    leaves, started = asyncio.Event(), asyncio.Event()
    swallowed = 0

    async def work() -> str:
        nonlocal swallowed
        started.set()
        while True:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                if swallowed == 2:
                    raise
                swallowed += 1
                asyncio.current_task().uncancel()  # type: ignore[union-attr]

    async def leave_once_started() -> None:
        await started.wait()
        leaves.set()

    leaving = asyncio.ensure_future(leave_once_started())
    assert await unless_client_leaves(_request(leaves), work()) is None
    assert swallowed == 2
    await leaving


async def test_work_that_outlives_its_client_runs_to_its_end_after_none_is_returned() -> None:
    leaves, started, finish = asyncio.Event(), asyncio.Event(), asyncio.Event()
    ended: list[str] = []

    async def work() -> str:
        started.set()
        await finish.wait()
        ended.append("ran to its end")
        return "stored for the retry"

    async def leave_once_started() -> None:
        await started.wait()
        leaves.set()

    leaving = asyncio.ensure_future(leave_once_started())
    assert await unless_client_leaves(_request(leaves), work(), outlive_client=True) is None
    await leaving
    assert ended == []  # still running: not cancelled when the client left
    finish.set()
    for _ in range(10):
        await asyncio.sleep(0)
    assert ended == ["ran to its end"]
