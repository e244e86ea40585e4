"""Chat requests sent at once, each timed: what the fault tests of issue 41 measure.

Owns: `timed_posts`, `count` chat requests to a gateway at once, each answer's status and
seconds from its send to its answer.
"""

from __future__ import annotations

import asyncio
import time

import httpx


async def timed_posts(
    base_url: str, key: str, model: str, count: int, timeout_s: float = 60
) -> list[tuple[int, float]]:
    """POST `count` chat completions for `model` with `key` to `base_url` at once.

    Returns:
        (status, seconds from send to answer) per request, in send order.

    Raises:
        httpx.HTTPError: a request failed without an answer (bounded by `timeout_s`).
    """
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=count), timeout=timeout_s) as client:

        async def one() -> tuple[int, float]:
            started = time.monotonic()
            response = await client.post(
                f"{base_url}/v1/chat/completions",
                headers={"authorization": f"Bearer {key}"},
                json={"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
            )
            return response.status_code, time.monotonic() - started

        return await asyncio.gather(*[one() for _ in range(count)])
