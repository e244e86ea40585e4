"""`turnout_worker.start_gate`: at most `passes` jobs in their start phase, oldest first; a pass is
given back by `leave` (the router's `paused` hook: tests/unit/test_router_paused.py), at the job's
end, or after `hold_s`."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnout_worker.start_gate import StartGate, leave

LONG_S = 3600.0  # a hold bound no test reaches


async def _job(gate: StartGate, name: str, inside: list[str], log: list[str], go: asyncio.Event) -> None:
    async with gate.start():
        inside.append(name)
        log.append(f"start {name}")
        await go.wait()
        inside.remove(name)


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_at_most_passes_jobs_start_at_once_oldest_first() -> None:
    gate = StartGate(2, LONG_S)
    inside: list[str] = []
    log: list[str] = []
    go = {n: asyncio.Event() for n in "abcde"}
    tasks = [asyncio.ensure_future(_job(gate, n, inside, log, go[n])) for n in "abcde"]
    await _settle()
    assert inside == ["a", "b"] and gate.free == 0
    go["b"].set()
    await _settle()
    assert inside == ["a", "c"]
    go["a"].set()
    await _settle()
    assert inside == ["c", "d"]
    for event in go.values():
        event.set()
    await asyncio.gather(*tasks)
    assert log == [f"start {n}" for n in "abcde"]
    assert gate.free == 2


async def test_leave_gives_the_pass_back_once() -> None:
    gate = StartGate(1, LONG_S)
    async with gate.start() as held:
        assert gate.free == 0
        leave()
        assert gate.free == 1
        leave()
        held.leave()
        assert gate.free == 1  # no extra pass
    assert gate.free == 1
    leave()  # outside a job: nothing
    assert gate.free == 1


async def test_the_next_job_starts_when_the_first_leaves() -> None:
    gate = StartGate(1, LONG_S)
    order: list[str] = []
    left = asyncio.Event()

    async def first() -> None:
        async with gate.start():
            order.append("first starts")
            leave()  # its first upstream call
            left.set()
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            order.append("first still running")

    async def second() -> None:
        await left.wait()
        async with gate.start():
            order.append("second starts")

    await asyncio.gather(first(), second())
    assert order == ["first starts", "second starts", "first still running"]


async def test_a_pass_held_past_hold_s_lets_the_next_job_in() -> None:
    gate = StartGate(1, 0.001)
    stuck = asyncio.Event()  # never set while the second job starts: a start phase that hangs
    entered = asyncio.Event()

    async def hung() -> None:
        async with gate.start():
            await stuck.wait()

    async def next_job() -> None:
        async with gate.start():
            entered.set()

    first = asyncio.ensure_future(hung())
    await _settle()
    second = asyncio.ensure_future(next_job())
    await asyncio.wait_for(entered.wait(), 30)  # the hold bound fired; 30 s is a hang guard only
    stuck.set()
    await asyncio.gather(first, second)
    assert gate.free == 1  # the bound's release and the exit did not both count


async def test_cancelled_while_waiting_takes_no_pass() -> None:
    gate = StartGate(1, LONG_S)
    go = asyncio.Event()
    holder = asyncio.ensure_future(_job(gate, "a", [], [], go))
    await _settle()
    waiter = asyncio.ensure_future(_job(gate, "b", [], [], go))
    await _settle()
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    go.set()
    await holder
    assert gate.free == 1


async def test_an_exception_inside_gives_the_pass_back() -> None:
    gate = StartGate(1, LONG_S)
    with pytest.raises(RuntimeError):
        async with gate.start():
            raise RuntimeError("the job failed")
    assert gate.free == 1


@pytest.mark.parametrize(("passes", "hold_s"), [(0, 1.0), (-1, 1.0), (1, 0.0), (1, -0.5)])
def test_bad_settings_are_refused(passes: int, hold_s: float) -> None:
    with pytest.raises(ValueError, match="passes|hold_s"):
        StartGate(passes, hold_s)


@settings(max_examples=60, deadline=None)
@given(
    passes=st.integers(min_value=1, max_value=4),
    plan=st.lists(st.sampled_from(["leave", "end", "raise"]), min_size=1, max_size=12),
)
def test_passes_in_use_never_exceed_the_bound_and_all_come_back(passes: int, plan: list[str]) -> None:
    """However jobs end (leave early, end, raise), no more than `passes` run their start phase at
    once, every job starts, in arrival order, and every pass comes back."""

    async def scenario() -> None:
        gate = StartGate(passes, LONG_S)
        in_start = 0
        most = 0
        started: list[int] = []

        async def job(i: int, how: str) -> None:
            nonlocal in_start, most
            async with gate.start():
                in_start += 1
                most = max(most, in_start)
                started.append(i)
                await asyncio.sleep(0)
                in_start -= 1
                if how == "leave":
                    leave()
                    await asyncio.sleep(0)
                elif how == "raise":
                    raise RuntimeError(i)

        await asyncio.gather(*(job(i, how) for i, how in enumerate(plan)), return_exceptions=True)
        assert most <= passes
        assert started == list(range(len(plan)))
        assert gate.free == passes

    asyncio.run(scenario())


async def test_the_workers_router_gives_the_pass_back_when_a_job_pauses() -> None:
    """The wiring: `worker_runtime`'s router calls `leave` (`tests/unit/test_router_paused.py`
    shows when a router calls its `paused` hook)."""
    from arq.worker import func
    from redis.asyncio import Redis

    from turnout.config import parse_config
    from turnout.settings import Settings
    from turnout_worker.app import chat_completion, worker_runtime
    from turnout_worker.pickup import PushWorker

    config = parse_config(
        'providers: {p: {kind: openai_compatible, base_url: "http://p.test/v1", api_key: k}}\n'
        "models: {m: {offers: [{provider: p, model: m}]}}\n",
        env={},
    )
    worker = PushWorker(functions=[func(chat_completion, name="job")], max_jobs=2)
    runtime = worker_runtime(config, Redis(), Settings.from_env({}), worker)
    try:
        gate = StartGate(1, LONG_S)
        async with gate.start():
            runtime.router._paused()
            assert gate.free == 1
    finally:
        await runtime.router._http.aclose()
