"""Fixtures of the `turnout.health` tests: fake time, the probe renewals' sleeps held by the test, a `Fleet`."""

from __future__ import annotations

import pytest

import turnout.health.probes
import turnout.health.writes
from support.breakers import AsyncioWithSleep, FakeTime, Fleet, ManualSleep


@pytest.fixture
def time() -> FakeTime:
    return FakeTime()


@pytest.fixture
def sleeper(time: FakeTime, monkeypatch: pytest.MonkeyPatch) -> ManualSleep:
    manual = ManualSleep(time)
    monkeypatch.setattr(turnout.health.probes, "asyncio", AsyncioWithSleep(manual))  # the permit renewals
    monkeypatch.setattr(turnout.health.writes, "asyncio", AsyncioWithSleep(manual))  # the writes' backoff
    return manual


@pytest.fixture
def fleet(time: FakeTime, sleeper: ManualSleep) -> Fleet:
    return Fleet(time, sleeper)
