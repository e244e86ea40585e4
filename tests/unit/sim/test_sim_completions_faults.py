"""`POST /v1/completions`: 400s naming the param, and the scenario steps seen through the `openai` SDK."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest


@pytest.fixture
async def oai(sim_url: str) -> AsyncIterator[openai.AsyncOpenAI]:
    client = openai.AsyncOpenAI(base_url=f"{sim_url}/v1", api_key="x", max_retries=0, timeout=10.0)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def http(sim_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=sim_url, headers={"Authorization": "Bearer x"}, timeout=5.0) as client:
        yield client


async def _log(http: httpx.AsyncClient) -> list[tuple[str | None, int | None, str | None]]:
    return [(e["step"], e["status"], e["end"]) for e in (await http.get("/sim/log")).json()]


@pytest.mark.parametrize(
    ("fields", "param", "code"),
    [
        ({}, "prompt", "missing_required_parameter"),
        ({"prompt": None}, "prompt", "missing_required_parameter"),
        ({"prompt": []}, "prompt", "invalid_type"),
        ({"prompt": [[]]}, "prompt", "invalid_type"),
        ({"prompt": ["a", 1]}, "prompt", "invalid_type"),
        ({"prompt": [[1], "a"]}, "prompt", "invalid_type"),
        ({"prompt": [1, -2]}, "prompt", "invalid_type"),
        ({"prompt": [True]}, "prompt", "invalid_type"),
        ({"prompt": {"text": "a"}}, "prompt", "invalid_type"),
        ({"prompt": 3}, "prompt", "invalid_type"),
        ({"prompt": "a", "max_tokens": -1}, "max_tokens", "integer_below_min_value"),
        ({"prompt": "a", "n": 0}, "n", "integer_below_min_value"),
        ({"prompt": "a", "logprobs": 6}, "logprobs", "integer_above_max_value"),
        ({"prompt": "a", "logprobs": True}, "logprobs", "invalid_type"),
        ({"prompt": "a", "suffix": 1}, "suffix", "invalid_type"),
        ({"prompt": "a", "stop": ["a", "b", "c", "d", "e"]}, "stop", "invalid_type"),
        ({"prompt": "a", "temperature": 3}, "temperature", "invalid_value"),
        ({"prompt": "a", "user": 7}, "user", "invalid_type"),
    ],
    ids=[
        "missing",
        "null",
        "empty-list",
        "empty-token-array",
        "mixed-strings",
        "mixed-arrays",
        "negative-token",
        "bool-token",
        "object",
        "number",
        "max-tokens",
        "n",
        "logprobs-range",
        "logprobs-bool",
        "suffix",
        "stop",
        "temperature",
        "user",
    ],
)
async def test_invalid_requests_are_400_naming_the_param(
    oai: openai.AsyncOpenAI, http: httpx.AsyncClient, fields: dict[str, Any], param: str, code: str
) -> None:
    with pytest.raises(openai.BadRequestError) as bad:
        await oai.post("/completions", body={"model": "m", **fields}, cast_to=httpx.Response)
    assert (bad.value.param, bad.value.code, bad.value.type) == (param, code, "invalid_request_error")
    assert [status for _, status, _ in await _log(http)] == [400]


async def test_no_model_and_no_key(http: httpx.AsyncClient, sim_url: str) -> None:
    missing = await http.post("/v1/completions", json={"prompt": "a"})
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "model"
    async with httpx.AsyncClient(base_url=sim_url) as anonymous:
        assert (await anonymous.post("/v1/completions", json={"model": "m", "prompt": "a"})).status_code == 401


async def test_429_with_retry_after_then_success(oai: openai.AsyncOpenAI, http: httpx.AsyncClient) -> None:
    with pytest.raises(openai.RateLimitError) as limited:
        await oai.completions.create(model="r~429ra2,200", prompt="x", max_tokens=1)
    assert limited.value.response.headers["retry-after"] == "2"
    assert limited.value.code == "rate_limit_exceeded"
    result = await oai.completions.create(model="r~429ra2,200", prompt="x", max_tokens=1)
    assert result.choices[0].text == "tok0"
    assert await _log(http) == [("429ra2", 429, "complete"), ("200", 200, "complete")]


async def test_error_steps_and_socket_faults_reach_the_sdk(oai: openai.AsyncOpenAI, http: httpx.AsyncClient) -> None:
    with pytest.raises(openai.InternalServerError):
        await oai.completions.create(model="f~fail100", prompt="x")
    with pytest.raises(openai.InternalServerError) as down:
        await oai.completions.create(model="f~503", prompt="x", stream=True)
    assert down.value.status_code == 503
    with pytest.raises(openai.BadRequestError) as ctx:
        await oai.completions.create(model="f~ctx", prompt="x")
    assert ctx.value.code == "context_length_exceeded"
    with pytest.raises(openai.APIConnectionError):
        await oai.completions.create(model="f~reset", prompt="x")
    with pytest.raises(openai.APIConnectionError):
        await oai.completions.create(model="f~cut1", prompt="x")
    assert await _log(http) == [
        ("fail100", 503, "complete"),
        ("503", 503, "complete"),
        ("ctx", 400, "complete"),
        ("reset", None, "fault"),
        ("cut1", 200, "fault"),
    ]


async def test_cut_stream_ends_after_n_pieces(oai: openai.AsyncOpenAI, http: httpx.AsyncClient) -> None:
    pieces: list[str] = []
    with pytest.raises(openai.APIConnectionError):
        stream = await oai.completions.create(model="c~cut2", prompt="x", max_tokens=5, stream=True)
        async for chunk in stream:
            pieces += [choice.text for choice in chunk.choices]
    assert pieces == ["tok0", " tok1"]
    assert await _log(http) == [("cut2", 200, "fault")]


async def test_body_faults(oai: openai.AsyncOpenAI, http: httpx.AsyncClient) -> None:
    with pytest.raises(openai.APIError) as failed:
        stream = await oai.completions.create(model="b~bodyerr", prompt="x", stream=True)
        async for _ in stream:
            pass
    assert "server" in str(failed.value.message).lower()
    bad = await http.post("/v1/completions", json={"model": "b~badchunk1", "prompt": "x"})
    assert bad.status_code == 200 and bad.text.startswith('{"id": "cmpl-') and '"text_completion"' in bad.text
    undone = await http.post("/v1/completions", json={"model": "b~nodone", "prompt": "x", "stream": True})
    assert "[DONE]" not in undone.text and undone.text.count("data: ") == 17
