"""Embeddings on `gemini` providers: OpenAI's request as a `batchEmbedContents` batch, its
answer as OpenAI's list (floats; the surface encodes base64), token arrays refused, and the
embeddings surface's base64 encoding of float vectors."""

from __future__ import annotations

import base64
import json
import struct

import httpx
import msgspec
import pytest

from turnout.adapters.base import AttemptResult, CallSpec
from turnout.adapters.chat_parts import WireError
from turnout.adapters.families import family_for
from turnout.adapters.gemini_embeddings import GEMINI_EMBEDDINGS, outcome_of_embeddings, to_batch_request
from turnout.core.classify import classify
from turnout.core.types import FailureKind, Target, TransportError
from turnout_ingress.surfaces.embeddings import as_base64


def test_the_batch_names_the_model_and_the_dimensions() -> None:
    batch = to_batch_request({"model": "x", "input": ["a", "b"], "dimensions": 8}, "gemini-embedding-001")
    assert batch == {
        "requests": [
            {"model": "models/gemini-embedding-001", "outputDimensionality": 8, "content": {"parts": [{"text": "a"}]}},
            {"model": "models/gemini-embedding-001", "outputDimensionality": 8, "content": {"parts": [{"text": "b"}]}},
        ]
    }
    assert to_batch_request({"input": "one"}, "m")["requests"] == [
        {"model": "models/m", "content": {"parts": [{"text": "one"}]}}
    ]


@pytest.mark.parametrize("given", [[1, 2, 3], [[1, 2]], []])
def test_token_arrays_are_refused_naming_input(given: object) -> None:
    with pytest.raises(WireError):
        to_batch_request({"input": given}, "m")
    refusal = GEMINI_EMBEDDINGS.refusal({"input": given}, "m")
    assert refusal is not None and refusal.param == "input"
    assert GEMINI_EMBEDDINGS.refusal({"input": "text"}, "m") is None


async def test_the_request_goes_to_batch_embed_contents_with_the_key_header() -> None:
    spec = CallSpec(
        target=Target(provider="gem", model="gemini-embedding-001", catalog_model="e"),
        base_url="https://generativelanguage.googleapis.com",
        api_key="AIza-key",
        body=b'{"model": "e", "input": ["a"]}',
        timeout_s=5.0,
        request_id="r",
        kind="gemini",
        operation="embeddings",
    )
    family = family_for("gemini", "embeddings")
    assert family is GEMINI_EMBEDDINGS and family_for("vertex", "completions") is None
    async with httpx.AsyncClient() as client:
        request = GEMINI_EMBEDDINGS.build_request(client, spec, stream=False)
    assert isinstance(request, httpx.Request)
    assert request.url.path == "/v1beta/models/gemini-embedding-001:batchEmbedContents"
    assert request.headers["x-goog-api-key"] == "AIza-key"
    assert json.loads(request.content)["requests"][0]["content"] == {"parts": [{"text": "a"}]}
    tokens = msgspec.structs.replace(spec, body=b'{"model": "e", "input": [1, 2]}')
    async with httpx.AsyncClient() as client:
        refused = GEMINI_EMBEDDINGS.build_request(client, tokens, stream=False)
    assert isinstance(refused, AttemptResult) and refused.outcome.status == 400


def test_the_answer_is_openais_list_of_floats_and_errors_are_googles() -> None:
    answer = {"embeddings": [{"values": [0.6, 0.8]}, {"values": [1.0, 0.0]}], "usageMetadata": {"promptTokenCount": 4}}
    result = outcome_of_embeddings(200, httpx.Headers(), msgspec.json.encode(answer), 1.0)
    assert result.body is not None and result.usage.input_tokens == 4
    body = json.loads(result.body)
    assert [d["embedding"] for d in body["data"]] == [[0.6, 0.8], [1.0, 0.0]] and body["object"] == "list"
    assert [d["index"] for d in body["data"]] == [0, 1]
    malformed = outcome_of_embeddings(200, httpx.Headers(), b'{"embedding": {}}', 1.0)
    assert malformed.outcome.transport is TransportError.PROTOCOL
    error = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    failed = outcome_of_embeddings(503, httpx.Headers(), msgspec.json.encode(error), 1.0)
    assert classify(failed.outcome) is FailureKind.SERVER_ERROR


def test_the_surface_encodes_float_vectors_in_base64_when_asked() -> None:
    body = b'{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,-1.0]}],"model":""}'
    encoded = json.loads(as_base64(body))["data"][0]["embedding"]
    assert struct.unpack("<2f", base64.b64decode(encoded)) == (0.5, -1.0)
    already = b'{"data":[{"embedding":"AAAAPwAAgL8="}]}'
    assert json.loads(as_base64(already))["data"][0]["embedding"] == "AAAAPwAAgL8="
    assert as_base64(b"not json") == b"not json"
