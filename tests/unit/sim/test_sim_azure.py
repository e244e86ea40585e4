"""The simulator speaks Azure OpenAI: the official SDK's `AzureOpenAI` client talks to it (chat,
streams, embeddings, legacy completions), its refusals are Azure's (401 `Access denied`, 400
without `api-version`, 429 `Please retry after N seconds` with Retry-After) and so are the
content filter steps (`cf400`, `cf200`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import openai
import pytest

VERSION = "2024-10-21"


@pytest.fixture
async def azure(sim_url: str) -> AsyncIterator[openai.AsyncAzureOpenAI]:
    client = openai.AsyncAzureOpenAI(
        azure_endpoint=sim_url, api_key="azure-key", api_version=VERSION, max_retries=0, timeout=5.0
    )
    try:
        yield client
    finally:
        await client.close()


async def test_the_sync_client_gets_a_completion_from_the_deployment(sim_url: str) -> None:
    def call() -> openai.types.chat.ChatCompletion:  # in a thread: the simulator runs on this loop
        with openai.AzureOpenAI(azure_endpoint=sim_url, api_key="k", api_version=VERSION, max_retries=0) as client:
            return client.chat.completions.create(
                model="gpt4o-prod", messages=[{"role": "user", "content": "hi"}], max_tokens=3
            )

    result = await asyncio.to_thread(call)
    assert result.model == "gpt4o-prod"
    assert result.choices[0].message.content == "tok0 tok1 tok2"


async def test_a_stream_from_a_deployment_is_openais_format(azure: openai.AsyncAzureOpenAI) -> None:
    stream = await azure.chat.completions.create(
        model="dep", messages=[{"role": "user", "content": "hi"}], max_tokens=4, stream=True
    )
    text, finish = "", None
    async for chunk in stream:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    assert (text, finish) == ("tok0 tok1 tok2 tok3", "stop")


async def test_embeddings_and_completions_of_a_deployment(azure: openai.AsyncAzureOpenAI) -> None:
    vectors = await azure.embeddings.create(model="te3-small", input=["a", "b"])
    assert len(vectors.data) == 2 and vectors.model == "te3-small"
    text = await azure.completions.create(model="instruct", prompt="say", max_tokens=2)
    assert text.choices[0].text == "tok0 tok1"


async def test_the_deployment_name_is_the_scenario_and_a_429_is_azures(sim_url: str) -> None:
    async with openai.AsyncAzureOpenAI(
        azure_endpoint=sim_url, api_key="k", api_version=VERSION, max_retries=0
    ) as azure:
        with pytest.raises(openai.RateLimitError) as limited:
            await azure.chat.completions.create(model="dep~429ra2,200", messages=[{"role": "user", "content": "x"}])
        served = await azure.chat.completions.create(
            model="dep~429ra2,200", messages=[{"role": "user", "content": "x"}]
        )
    assert limited.value.response.headers["retry-after"] == "2"
    assert limited.value.code == "429"
    assert "ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21" in limited.value.message
    assert "Please retry after 2 seconds" in limited.value.message
    assert served.choices[0].finish_reason == "stop"


async def test_a_wrong_key_is_azures_401(sim_url: str) -> None:
    async with openai.AsyncAzureOpenAI(
        azure_endpoint=sim_url, api_key="sk-sim-revoked-1", api_version=VERSION, max_retries=0
    ) as azure:
        with pytest.raises(openai.AuthenticationError) as denied:
            await azure.chat.completions.create(model="dep", messages=[{"role": "user", "content": "x"}])
    assert denied.value.code == "401"
    assert "401 - Access denied due to invalid subscription key" in denied.value.message


@pytest.mark.parametrize(
    ("headers", "query", "status"),
    [
        ({}, "?api-version=2024-10-21", 401),
        ({"api-key": ""}, "?api-version=2024-10-21", 401),
        ({"Authorization": "Bearer k"}, "?api-version=2024-10-21", 401),  # never a Bearer token
        ({"api-key": "k"}, "", 400),
        ({"api-key": "k"}, "?api-version=2024-10-21", 200),
    ],
    ids=["no-key", "empty-key", "bearer", "no-api-version", "served"],
)
async def test_the_key_and_api_version_are_required(
    sim_url: str, headers: dict[str, str], query: str, status: int
) -> None:
    async with httpx.AsyncClient(base_url=sim_url) as client:
        resp = await client.post(
            f"/openai/deployments/dep/chat/completions{query}", json={"messages": []}, headers=headers
        )
    assert resp.status_code == status
    if status == 401:
        assert resp.json()["error"]["code"] == "401"
    if status == 400:
        assert "api-version" in resp.json()["error"]["message"]


async def test_the_prompt_filter_is_a_bad_request_with_code_content_filter(azure: openai.AsyncAzureOpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        await azure.chat.completions.create(model="dep~cf400", messages=[{"role": "user", "content": "x"}])
    assert refused.value.code == "content_filter"
    body = refused.value.body
    assert isinstance(body, dict)
    assert body["innererror"]["code"] == "ResponsibleAIPolicyViolation"
    assert body["innererror"]["content_filter_result"]["hate"]["filtered"] is True


async def test_a_filtered_completion_ends_with_finish_reason_content_filter(azure: openai.AsyncAzureOpenAI) -> None:
    result = await azure.chat.completions.create(model="dep~cf200", messages=[{"role": "user", "content": "x"}])
    assert result.choices[0].finish_reason == "content_filter"
    assert result.choices[0].message.content is None
    stream = await azure.chat.completions.create(
        model="dep~cf200", messages=[{"role": "user", "content": "x"}], stream=True, max_tokens=2
    )
    finishes = [c.finish_reason async for chunk in stream for c in chunk.choices if c.finish_reason]
    assert finishes == ["content_filter"]


async def test_the_openai_routes_take_cf400_too(sim_url: str) -> None:
    async with openai.AsyncOpenAI(base_url=f"{sim_url}/v1", api_key="k", max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(model="m~cf400", messages=[{"role": "user", "content": "x"}])
    assert refused.value.code == "content_filter"
