"""Fixtures of the adapter tests: the in-process simulator."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from turnout_sim.app import start_in_background


@pytest.fixture
async def sim() -> AsyncIterator[str]:
    """The simulator's root URL, served in this process for the test."""
    runner, url = await start_in_background("127.0.0.1", 0)
    try:
        yield url
    finally:
        await runner.cleanup()
