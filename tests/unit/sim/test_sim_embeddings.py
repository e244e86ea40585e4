"""`POST /v1/embeddings` through the official `openai` SDK: input forms, encodings, validation, faults."""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest

from turnout_sim import embeddings_wire


@pytest.fixture
async def oai(sim_url: str) -> AsyncIterator[openai.AsyncOpenAI]:
    client = openai.AsyncOpenAI(base_url=f"{sim_url}/v1", api_key="x", max_retries=0, timeout=10.0)
    try:
        yield client
    finally:
        await client.close()


def _floats(encoded: object) -> list[float]:
    assert isinstance(encoded, str)
    raw = base64.b64decode(encoded)
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def _norm(vector: list[float]) -> float:
    return math.sqrt(sum(v * v for v in vector))


@pytest.mark.parametrize(
    ("value", "count", "tokens"),
    [
        ("hello world", 1, 2),
        (["hello world", "bye"], 2, 3),
        ([1, 2, 3], 1, 3),
        ([[1, 2], [3, 4, 5]], 2, 5),
    ],
    ids=["string", "strings", "token-array", "token-arrays"],
)
@pytest.mark.parametrize("encoding", ["float", "base64", None], ids=["float", "base64", "sdk-default"])
async def test_every_input_form_and_encoding(
    oai: openai.AsyncOpenAI, value: Any, count: int, tokens: int, encoding: str | None
) -> None:
    extra: Any = {} if encoding is None else {"encoding_format": encoding}
    result = await oai.embeddings.create(model="text-embedding-3-small", input=value, **extra)
    assert result.object == "list" and result.model == "text-embedding-3-small"
    assert [d.index for d in result.data] == list(range(count))
    # the SDK decodes base64 itself unless the caller asked for it (then it hands over the text)
    vectors = [_floats(d.embedding) if encoding == "base64" else d.embedding for d in result.data]
    assert all(d.object == "embedding" for d in result.data)
    assert all(len(v) == 1536 and abs(_norm(v) - 1.0) < 1e-5 for v in vectors)
    assert result.usage.prompt_tokens == result.usage.total_tokens == tokens


async def test_vectors_are_deterministic_per_model_and_input(oai: openai.AsyncOpenAI) -> None:
    first = await oai.embeddings.create(model="emb-a", input=["x", "y"], encoding_format="float")
    again = await oai.embeddings.create(model="emb-a~200", input="x", encoding_format="float")
    other = await oai.embeddings.create(model="emb-b", input="x", encoding_format="float")
    assert first.data[0].embedding == again.data[0].embedding
    assert first.data[0].embedding != first.data[1].embedding
    assert first.data[0].embedding != other.data[0].embedding


async def test_base64_is_little_endian_float32_of_the_float_vector(sim_url: str) -> None:
    async with httpx.AsyncClient(base_url=sim_url, headers={"Authorization": "Bearer x"}) as http:
        body = {"model": "m", "input": "hi", "dimensions": 8}
        floats = (await http.post("/v1/embeddings", json=body)).json()["data"][0]["embedding"]
        packed = (await http.post("/v1/embeddings", json=body | {"encoding_format": "base64"})).json()
    decoded = struct.unpack("<8f", base64.b64decode(packed["data"][0]["embedding"]))
    assert decoded == pytest.approx(floats, rel=1e-6)


async def test_dimensions_cut_the_model_vector_and_normalise(oai: openai.AsyncOpenAI) -> None:
    full = await oai.embeddings.create(model="text-embedding-3-large", input="x", encoding_format="float")
    short = await oai.embeddings.create(model="text-embedding-3-large", input="x", dimensions=4, user="u1")
    assert len(full.data[0].embedding) == 3072 and len(short.data[0].embedding) == 4
    head = full.data[0].embedding[:4]
    scale = _norm(head)
    assert short.data[0].embedding == pytest.approx([v / scale for v in head], rel=1e-5)


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"input": ""}, "input"),
        ({"input": []}, "input"),
        ({"input": ["ok", ""]}, "input"),
        ({"input": ["ok", 3]}, "input"),
        ({"input": ["x"] * (embeddings_wire.MAX_INPUTS + 1)}, "input"),
        ({}, "input"),
        ({"input": "x", "encoding_format": "int8"}, "encoding_format"),
        ({"input": "x", "dimensions": 0}, "dimensions"),
        ({"input": "x", "dimensions": 1537}, "dimensions"),
        ({"input": "x", "dimensions": "8"}, "dimensions"),
    ],
    ids=[
        "empty-string",
        "empty-list",
        "empty-item",
        "mixed-list",
        "too-many",
        "missing",
        "bad-encoding",
        "zero-dimensions",
        "too-many-dimensions",
        "text-dimensions",
    ],
)
async def test_invalid_requests_are_400_naming_the_param(
    oai: openai.AsyncOpenAI, fields: dict[str, Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as bad:
        await oai.post("/embeddings", body={"model": "m", **fields}, cast_to=httpx.Response)
    assert bad.value.param == param
    assert bad.value.body is not None and bad.value.type == "invalid_request_error"


async def test_max_inputs_are_accepted(oai: openai.AsyncOpenAI) -> None:
    result = await oai.embeddings.create(model="m", input=["x"] * embeddings_wire.MAX_INPUTS, dimensions=2)
    assert len(result.data) == embeddings_wire.MAX_INPUTS


async def test_429_with_retry_after_then_success(oai: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.RateLimitError) as limited:
        await oai.embeddings.create(model="e~429ra2,200", input="x")
    assert limited.value.response.headers["retry-after"] == "2"
    assert limited.value.code == "rate_limit_exceeded"
    result = await oai.embeddings.create(model="e~429ra2,200", input="x")
    assert len(result.data[0].embedding) == 1536


async def test_faults_reach_the_sdk(oai: openai.AsyncOpenAI, sim_url: str) -> None:
    with pytest.raises(openai.InternalServerError):
        await oai.embeddings.create(model="f~fail100", input="x")
    with pytest.raises(openai.APIConnectionError):
        await oai.embeddings.create(model="f~reset", input="x")
    with pytest.raises(openai.APIConnectionError):
        await oai.embeddings.create(model="f~cut1", input="x")
    async with httpx.AsyncClient(base_url=sim_url, headers={"Authorization": "Bearer x"}) as http:
        log = (await http.get("/sim/log")).json()
    assert [(e["step"], e["status"], e["end"]) for e in log] == [
        ("fail100", 503, "complete"),
        ("reset", None, "fault"),
        ("cut1", 200, "fault"),
    ]
