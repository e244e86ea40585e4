"""Fixtures: an in-process simulator on 127.0.0.1 (port 0) and an httpx client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import httpx
import pytest

from turnout_sim.app import start_in_background
from turnout_sim.clock import ManualClock

API_KEY = "test-key"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def sim_url() -> AsyncIterator[str]:
    """Base URL of a simulator using the real clock."""
    runner, url = await start_in_background("127.0.0.1", 0)
    try:
        yield url
    finally:
        await runner.cleanup()


@pytest.fixture
async def fake_clock_url(clock: ManualClock) -> AsyncIterator[str]:
    """Base URL of a simulator driven by the `clock` fixture."""
    runner, url = await start_in_background("127.0.0.1", 0, clock=clock)
    try:
        yield url
    finally:
        await runner.cleanup()


@pytest.fixture
async def client(sim_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=sim_url, timeout=5.0, headers={"Authorization": f"Bearer {API_KEY}"}) as c:
        yield c


@pytest.fixture
def post(
    client: httpx.AsyncClient,
) -> Callable[..., Coroutine[Any, Any, httpx.Response]]:
    """`await post(model, stream=False, headers=None, **body_fields)`."""

    async def _post(
        model: str,
        *,
        stream: bool = False,
        headers: dict[str, str] | None = None,
        **fields: Any,
    ) -> httpx.Response:
        body = {
            "model": model,
            "messages": [{"role": "user", "content": "say hi"}],
            "stream": stream,
        }
        return await client.post("/v1/chat/completions", json=body | fields, headers=headers)

    return _post
