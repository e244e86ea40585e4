"""The simulator's `/keyed/v1/` routes speak OpenAI's chat completions and embeddings as a
self-hosted endpoint behind its own auth does: the key alone in `api-key` (401 in OpenAI's
shape without it, whatever `Authorization` says), the request's `x-*` headers kept in the log.
Checked with the official openai SDK."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import openai
import pytest


@pytest.fixture
async def keyed(sim_url: str) -> AsyncIterator[openai.AsyncOpenAI]:
    client = openai.AsyncOpenAI(
        base_url=f"{sim_url}/keyed/v1",
        api_key="unused",
        default_headers={"api-key": "endpoint-key", "X-Team": "team-a"},
        max_retries=0,
        timeout=5.0,
    )
    try:
        yield client
    finally:
        await client.close()


async def test_the_key_in_api_key_is_served_and_the_extra_headers_are_logged(
    keyed: openai.AsyncOpenAI, sim_url: str
) -> None:
    answer = await keyed.chat.completions.create(model="kd", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    assert answer.choices[0].message.content == "tok0 tok1"
    vectors = await keyed.embeddings.create(model="kd-emb", input=["a"])
    assert len(vectors.data) == 1
    async with httpx.AsyncClient() as http:
        log = (await http.get(f"{sim_url}/sim/log")).json()
    assert [e["received"]["headers"]["x-team"] for e in log] == ["team-a"] * 2


async def test_a_bearer_key_alone_is_refused_as_openai_refuses_a_missing_key(sim_url: str) -> None:
    async with openai.AsyncOpenAI(base_url=f"{sim_url}/keyed/v1", api_key="sk-bearer", max_retries=0) as client:
        with pytest.raises(openai.AuthenticationError) as refused:
            await client.chat.completions.create(model="kd", messages=[{"role": "user", "content": "hi"}])
    assert "API key" in refused.value.message
