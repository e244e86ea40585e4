"""The official `openai` SDK can talk to the simulator (JSON and streaming)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import openai
import pytest


@pytest.fixture
async def sdk(sim_url: str) -> AsyncIterator[openai.AsyncOpenAI]:
    client = openai.AsyncOpenAI(base_url=f"{sim_url}/v1", api_key="x", max_retries=0, timeout=5.0)
    try:
        yield client
    finally:
        await client.close()


async def test_sdk_completion(sdk: openai.AsyncOpenAI) -> None:
    result = await sdk.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "hello there"}],
        max_tokens=3,
    )
    assert result.model == "gpt-4o-mini"
    assert result.choices[0].message.content == "tok0 tok1 tok2"
    assert result.choices[0].finish_reason == "stop"
    assert result.usage is not None and result.usage.completion_tokens == 3


async def test_sdk_stream(sdk: openai.AsyncOpenAI) -> None:
    stream = await sdk.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=5,
        stream=True,
        stream_options={"include_usage": True},
    )
    text, usage, finish = "", None, None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    assert text == "tok0 tok1 tok2 tok3 tok4"
    assert finish == "stop"
    assert usage is not None and usage.total_tokens == usage.prompt_tokens + 5


async def test_sdk_maps_errors(sdk: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.RateLimitError) as limited:
        await sdk.chat.completions.create(model="e~429ra1", messages=[])
    assert limited.value.code == "rate_limit_exceeded"
    assert limited.value.response.headers["retry-after"] == "1"
    with pytest.raises(openai.BadRequestError) as ctx:
        await sdk.chat.completions.create(model="e~ctx", messages=[])
    assert ctx.value.code == "context_length_exceeded"
    with pytest.raises(openai.APIError):
        stream = await sdk.chat.completions.create(model="e~bodyerr", messages=[], stream=True)
        async for _ in stream:
            pass


async def test_sdk_lists_models(sdk: openai.AsyncOpenAI) -> None:
    page = await sdk.models.list()
    assert "gpt-4o-mini" in [m.id for m in page.data]
