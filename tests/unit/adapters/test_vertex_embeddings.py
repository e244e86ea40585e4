"""Embeddings on `vertex` providers: OpenAI's request as Vertex AI's `:predict` (one instance per
text, `parameters.outputDimensionality`), an access token as a Bearer token, its answer read as
OpenAI's list with the predictions' token counts as usage, against the in-process simulator."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import msgspec
import pytest

from support.google_keys import write_key_file
from turnout.adapters.base import CallSpec
from turnout.adapters.exchange import call_json
from turnout.adapters.families import family_for
from turnout.adapters.vertex_embeddings import VERTEX_EMBEDDINGS, outcome_of_predictions, to_predict_request
from turnout.core.classify import classify
from turnout.core.types import FailureKind, Target, TransportError
from turnout_sim.app import start_in_background


def _spec(base_url: str, key_file: Path, model: str = "text-embedding-005", body: bytes = b"") -> CallSpec:
    return CallSpec(
        target=Target(provider="vx", model=model, catalog_model="e"),
        base_url=base_url,
        api_key="",
        body=body or b'{"model": "e", "input": ["two words", "one"], "dimensions": 8}',
        timeout_s=5.0,
        request_id="r",
        kind="vertex",
        operation="embeddings",
        project="my-proj",
        location="us-central1",
        credentials_file=str(key_file),
    )


def test_the_predict_body_has_one_instance_per_text_and_the_dimensions() -> None:
    assert to_predict_request({"input": ["a", "b"], "dimensions": 8}) == {
        "instances": [{"content": "a"}, {"content": "b"}],
        "parameters": {"outputDimensionality": 8},
    }
    assert to_predict_request({"input": "one"}) == {"instances": [{"content": "one"}]}
    refusal = VERTEX_EMBEDDINGS.refusal({"input": [1, 2]}, "m")
    assert refusal is not None and refusal.param == "input"
    assert family_for("vertex", "embeddings") is VERTEX_EMBEDDINGS


async def test_an_embedding_is_asked_of_predict_with_the_access_token(tmp_path: Path) -> None:
    runner, url = await start_in_background("127.0.0.1", 0)
    try:
        key_file = write_key_file(tmp_path / "sa.json", url + "/token")
        async with httpx.AsyncClient() as client:
            served = await call_json(client, _spec(url, key_file))
            failed = await call_json(client, _spec(url, key_file, model="text-embedding-005~429ra20"))
            log = (await client.get(url + "/sim/log")).json()
    finally:
        await runner.cleanup()
    assert served.outcome.status == 200 and served.body is not None
    body = json.loads(served.body)
    assert [len(d["embedding"]) for d in body["data"]] == [8, 8] and [d["index"] for d in body["data"]] == [0, 1]
    assert body["usage"] == {"prompt_tokens": 3, "total_tokens": 3} and served.usage.input_tokens == 3
    assert json.loads(log[0]["received"]["body"])["instances"] == [{"content": "two words"}, {"content": "one"}]
    assert classify(failed.outcome) is FailureKind.RATE_LIMITED and failed.outcome.retry_after_s == 20.0


@pytest.mark.parametrize("content", [b'{"predictions": [{"embeddings": {}}]}', b'{"x": 1}', b"[]"])
def test_an_answer_without_vectors_is_malformed(content: bytes) -> None:
    outcome = outcome_of_predictions(200, httpx.Headers(), content, 0.0).outcome
    assert outcome.transport is TransportError.PROTOCOL


def test_a_google_error_keeps_its_status_name() -> None:
    error = {"error": {"code": 400, "message": "Instances count 3 exceeds the limit 1.", "status": "INVALID_ARGUMENT"}}
    result = outcome_of_predictions(400, httpx.Headers(), msgspec.json.encode(error), 0.0)
    assert result.outcome.status == 400 and result.outcome.error_type == "INVALID_ARGUMENT"
