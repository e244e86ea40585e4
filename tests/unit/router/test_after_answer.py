"""`turnout.router.after_answer`: a plain success's bookkeeping waits for the end of the
worker's scope (after the delivery); failures and a probe's success are counted in place; without
a scope nothing changes; the attempt span still ends at the attempt's own end."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from support.clocks import FakeClock
from support.two_providers import CHAIN, TWO_PROVIDERS, a_down_b_up
from turnout.catalog import Catalog
from turnout.config import parse_config
from turnout.core.loop import AttemptRecord
from turnout.core.plan import RoutingSettings
from turnout.core.types import FailureKind
from turnout.health import Gate
from turnout.observability.telemetry import SpanObserver
from turnout.router import NullObserver, RequestInfo, Router, RouteResult
from turnout.router.after_answer import answer_first, ended_at_ns, later

CONFIG = (
    TWO_PROVIDERS
    + CHAIN
    + """\
policy:
  retry: {max_retries: 0}
"""
)


class _Ticks:
    """A wall clock in ns that moves 1,000 ns per reading."""

    def __init__(self) -> None:
        self.now_ns = 0

    def __call__(self) -> int:
        self.now_ns += 1_000
        return self.now_ns


# ------------------------------------------------------------------ the scope


async def test_outside_a_scope_nothing_is_kept() -> None:
    async def work() -> None:
        raise AssertionError("never run")

    assert later(work) is False
    assert ended_at_ns() is None


async def test_the_work_runs_at_the_end_of_the_scope_in_order_with_its_hand_over_time() -> None:
    events: list[Any] = []

    def piece(name: str) -> Any:
        async def work() -> None:
            events.append((name, ended_at_ns()))

        return work

    ticks = _Ticks()
    async with answer_first(clock_ns=ticks):
        assert later(piece("first")) and later(piece("second"))
        events.append("block ends")
    assert events == ["block ends", ("first", 1_000), ("second", 2_000)]
    assert ended_at_ns() is None


async def test_a_scope_inside_a_scope_keeps_its_own_work() -> None:
    events: list[str] = []

    def piece(name: str) -> Any:
        async def work() -> None:
            events.append(name)

        return work

    async with answer_first():
        later(piece("outer"))
        async with answer_first():
            later(piece("inner"))
        events.append("inner scope ended")
    assert events == ["inner", "inner scope ended", "outer"]


async def test_a_piece_that_raises_is_logged_and_the_next_still_runs(caplog: pytest.LogCaptureFixture) -> None:
    events: list[str] = []

    async def broken() -> None:
        raise RuntimeError("boom")

    async def fine() -> None:
        events.append("ran")

    with caplog.at_level(logging.ERROR, logger="turnout.router"):
        async with answer_first():
            later(broken)
            later(fine)
    assert events == ["ran"]
    assert "bookkeeping after the answer failed" in caplog.text and "boom" in caplog.text


async def test_the_work_runs_when_the_block_raises() -> None:
    events: list[str] = []

    async def work() -> None:
        events.append("ran")

    with pytest.raises(ValueError, match="bad"):
        async with answer_first():
            later(work)
            raise ValueError("bad")
    assert events == ["ran"]


async def test_a_cancelled_block_still_runs_its_work() -> None:
    events: list[str] = []
    entered = asyncio.Event()

    async def work() -> None:
        events.append("ran")

    async def job() -> None:
        async with answer_first():
            later(work)
            entered.set()
            await asyncio.Event().wait()  # cancelled here

    task = asyncio.ensure_future(job())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert events == ["ran"]


async def test_a_cancellation_while_the_work_runs_stops_that_piece_and_the_rest_still_run() -> None:
    events: list[str] = []
    entered = asyncio.Event()

    async def slow() -> None:
        entered.set()
        await asyncio.Event().wait()  # cancelled here
        events.append("never")

    async def after(name: str) -> Any:
        async def work() -> None:
            events.append(f"{name} at {ended_at_ns()}")

        return work

    ticks = _Ticks()

    async def job() -> None:
        async with answer_first(clock_ns=ticks):
            later(slow)
            later(await after("second"))
            later(await after("third"))

    task = asyncio.ensure_future(job())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with asyncio.timeout(10):  # bounded: a broken scope fails, never hangs
        while len(events) < 2:
            await asyncio.sleep(0)
    assert events == ["second at 2000", "third at 3000"]


# ------------------------------------------------------------------ the router


class _Spy(NullObserver):
    def __init__(self, events: list[str]) -> None:
        self.events = events

    def attempt_ended(self, handle: object, info: RequestInfo, record: AttemptRecord, usage: Any) -> None:
        self.events.append(f"ended {record.target.provider} {record.kind}")


def _router(events: list[str], *, probe: bool = False, observer: Any = None) -> tuple[Router, Any]:
    config = parse_config(CONFIG, env={})
    catalog = Catalog(config)
    clock = FakeClock(0.0)
    breakers = clock.breakers(catalog)
    record, admit = breakers.results.record, breakers.gate.admit

    async def counted(target: str, kind: FailureKind, **kwargs: Any) -> None:
        events.append(f"breaker {target} {kind}")
        await record(target, kind, **kwargs)

    async def admitted(target: str, view: Any) -> Gate:
        gate = await admit(target, view)
        return Gate(admitted=True, probe_token="probe-1") if probe and target.startswith("pb/") else gate

    breakers.results.record = counted  # type: ignore[method-assign]
    breakers.gate.admit = admitted  # type: ignore[method-assign]
    router = Router(
        catalog=catalog,
        http=httpx.AsyncClient(transport=a_down_b_up(events)),
        observer=observer or _Spy(events),
        sleep=clock.sleep,
        clock=clock,
        rng=random.Random(5),
        breakers=breakers,
    )
    return router, config


async def _route(router: Router, config: Any) -> RouteResult:
    plan, view = await router.plan("chain", RoutingSettings(), config.policy)
    info = RequestInfo(request_id="rid", org="acme", requested_model="chain")
    return await router.route(
        {"model": "chain", "messages": []}, plan=plan, view=view, policy=config.policy, time_left_s=30, info=info
    )


FAILURE_IN_PLACE = ["upstream pa.test", "ended pa server_error", "breaker pa/m-a server_error", "upstream pb.test"]
SUCCESS_BOOKKEEPING = ["ended pb success", "breaker pb/m-b success"]


async def test_in_a_scope_a_plain_success_is_recorded_after_the_block_and_a_failure_in_place() -> None:
    events: list[str] = []
    router, config = _router(events)
    async with answer_first():
        routed = await _route(router, config)
        assert routed.body is not None and routed.verdict is None
        events.append("delivered")
    assert events == [*FAILURE_IN_PLACE, "delivered", *SUCCESS_BOOKKEEPING]


async def test_a_probes_success_is_recorded_in_place_even_in_a_scope() -> None:
    events: list[str] = []
    router, config = _router(events, probe=True)
    async with answer_first():
        routed = await _route(router, config)
        assert routed.body is not None
        events.append("delivered")
    assert events == [*FAILURE_IN_PLACE, *SUCCESS_BOOKKEEPING, "delivered"]


async def test_without_a_scope_a_success_is_recorded_in_place() -> None:
    events: list[str] = []
    router, config = _router(events)
    routed = await _route(router, config)
    assert routed.body is not None
    events.append("delivered")
    assert events == [*FAILURE_IN_PLACE, *SUCCESS_BOOKKEEPING, "delivered"]


# ------------------------------------------------------------------ the attempt span


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.clear()


async def test_a_span_ended_after_the_answer_ends_at_the_attempts_own_end(spans: InMemorySpanExporter) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    config = parse_config(CONFIG, env={})
    observer = SpanObserver(provider.get_tracer("test"), Catalog(config))
    events: list[str] = []
    router, _ = _router(events, observer=observer)  # the span observer alone
    ticks = _Ticks()
    ticks.now_ns = 5_000_000_000_000
    async with answer_first(clock_ns=ticks):
        await _route(router, config)
        # the failure and its HTTP span beneath, in place
        assert [s.name for s in spans.get_finished_spans()] == ["POST", "chat m-a"]
    http, attempt = spans.get_finished_spans()[-2:]
    assert (http.name, attempt.name) == ("POST", "chat m-b")
    assert attempt.end_time == http.end_time == 5_000_000_001_000  # the hand-over time, not the time it was recorded
