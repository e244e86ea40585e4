"""The worker's job runs inside `answer_first`: bookkeeping handed over while serving runs after
the answer is delivered, also when serving raises and a 500 is delivered instead."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from support.jobs import job_payload
from turnout.router.after_answer import later
from turnout.wire import JobPayload, payload_encoder
from turnout_worker import app, observe


class _Obs:
    @contextlib.contextmanager
    def job(self, payload: JobPayload, enqueue_time: Any) -> Iterator[None]:
        yield None


def _ctx() -> dict[str, Any]:
    return {"turnout": type("Services", (), {"obs": _Obs()})()}


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    events: list[str] = []

    async def deliver(ctx: dict[str, Any], payload: JobPayload, result: Any) -> None:
        events.append(f"delivered {result.status_code}")

    monkeypatch.setattr(app, "_deliver", deliver)
    monkeypatch.setattr(observe, "set_job_result", lambda span, result: events.append(f"result {result}"))
    return events


def _bookkeeping(events: list[str]) -> Any:
    async def work() -> None:
        events.append("bookkeeping")

    return work


async def test_the_bookkeeping_runs_after_the_delivery(events: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    async def serve(ctx: dict[str, Any], payload: JobPayload) -> str:
        assert later(_bookkeeping(events))
        await app._deliver(ctx, payload, type("Result", (), {"status_code": 200})())
        return "served"

    monkeypatch.setattr(app, "_serve", serve)
    raw = payload_encoder.encode(job_payload("rid", 2e9))
    assert await app._chat_completion(_ctx(), raw) == "served"
    assert events == ["delivered 200", "bookkeeping", "result served"]


async def test_a_job_that_raises_gets_its_500_first_and_its_bookkeeping_still(
    events: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def serve(ctx: dict[str, Any], payload: JobPayload) -> str:
        assert later(_bookkeeping(events))
        raise RuntimeError("a bug")

    monkeypatch.setattr(app, "_serve", serve)
    raw = payload_encoder.encode(job_payload("rid", 2e9))
    assert await app._chat_completion(_ctx(), raw) == "error 500"
    assert events == ["delivered 500", "bookkeeping", "result error 500"]
