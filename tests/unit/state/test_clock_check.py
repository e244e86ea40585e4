"""The clock-skew check (`turnout.state.clock_check`): gauge always set, a warning beyond 1 s."""

from __future__ import annotations

import asyncio
import logging

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from turnout.observability.metrics import Metrics
from turnout.state.clock_check import ClockSkewCheck

REDIS_S = 1_800_000_000


class FakeTime:
    """A Redis stand-in answering `TIME` with a fixed clock, and a local clock advancing per read."""

    def __init__(self, local_offset_s: float, round_trip_s: float = 0.002, fail: bool = False) -> None:
        self.reads = 0
        self.local_offset_s = local_offset_s
        self.round_trip_s = round_trip_s
        self.fail = fail

    async def time(self) -> tuple[int, int]:
        if self.fail:
            raise RedisConnectionError("down")
        return REDIS_S, 250_000

    def wall(self) -> float:
        self.reads += 1
        # first read: just before the request; second: after the round trip
        return REDIS_S + 0.25 + self.local_offset_s + (self.round_trip_s / 2) * (1 if self.reads % 2 == 0 else -1)


def _check(fake: FakeTime, metrics: Metrics) -> ClockSkewCheck:
    return ClockSkewCheck(fake, metrics.clock_skew, service="turnout-worker", wall=fake.wall)  # type: ignore[arg-type]


def _gauge(metrics: Metrics) -> float:
    value = metrics.registry.get_sample_value("turnout_clock_skew_seconds")
    assert value is not None
    return value


@pytest.mark.parametrize("offset", [30.0, -30.0])
def test_a_skewed_clock_sets_the_gauge_and_logs_a_structured_warning(
    offset: float, caplog: pytest.LogCaptureFixture
) -> None:
    metrics = Metrics()
    with caplog.at_level(logging.WARNING, logger="turnout.clock"):
        skew = asyncio.run(_check(FakeTime(offset), metrics).check_once())
    assert skew == pytest.approx(offset, abs=1e-6)
    assert _gauge(metrics) == pytest.approx(offset, abs=1e-6)
    [record] = caplog.records
    assert record.clock_skew_s == pytest.approx(offset, abs=1e-3)  # type: ignore[attr-defined]
    assert record.service_kind == "turnout-worker"  # type: ignore[attr-defined]
    assert ("ahead of" if offset > 0 else "behind") in record.getMessage()


def test_a_clock_within_a_second_sets_the_gauge_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    metrics = Metrics()
    with caplog.at_level(logging.WARNING, logger="turnout.clock"):
        asyncio.run(_check(FakeTime(0.4), metrics).check_once())
    assert _gauge(metrics) == pytest.approx(0.4, abs=1e-6)
    assert caplog.records == []


def test_run_checks_at_start_and_every_interval_and_survives_redis_errors() -> None:
    metrics = Metrics()
    fake = FakeTime(5.0, fail=True)
    sleeps: list[float] = []

    async def sleep(delay_s: float) -> None:
        sleeps.append(delay_s)
        fake.fail = False  # Redis comes back after the first failed check
        if len(sleeps) == 2:
            raise asyncio.CancelledError

    check = ClockSkewCheck(
        fake,  # type: ignore[arg-type]
        metrics.clock_skew,
        service="x",
        wall=fake.wall,
        interval_s=30,
        sleep=sleep,
    )
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(check.run())
    assert sleeps == [30, 30]
    assert _gauge(metrics) == pytest.approx(5.0, abs=1e-6)
