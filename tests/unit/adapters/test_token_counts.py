"""A provider's own token count of a Messages request (`turnout.adapters.token_counts`), per family,
against the in-process simulator: the Anthropic API, the Gemini API, Vertex AI (Gemini by
`:countTokens`, Claude by `count-tokens:rawPredict`, an access token from the simulator's token
endpoint) and Bedrock's `CountTokens` (SigV4-signed); any failure is None, never an exception."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.google_keys import write_key_file
from turnout.adapters.bedrock import count_tokens_call as bedrock_count
from turnout.adapters.token_counts import COUNTING_KINDS, CountAttempt, count_request, count_spec, provider_count
from turnout.adapters.vertex import count_tokens_call as vertex_count
from turnout.aws.keys import join_key
from turnout.config import ProviderConfig
from turnout.core.classify import classify
from turnout.core.types import FailureKind, Target
from turnout_sim.credentials import AWS_TEST_KEYS

MESSAGES: dict[str, Any] = {
    "model": "m",
    "system": "be brief",
    "max_tokens": 50,
    "temperature": 0.5,
    "messages": [{"role": "user", "content": "three words here"}],
}
"""Five words: what the simulator counts."""
OPENAI: dict[str, Any] = {
    "model": "m",
    "max_tokens": 1,
    "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "three words here"}],
}
"""The OpenAI chat form of `MESSAGES`."""
AKID = "AKIASIMULATOR0000001"


def _provider(kind: str, url: str, tmp_path: Path, **fields: Any) -> ProviderConfig:
    given: dict[str, Any] = {"kind": kind, "base_url": url}
    if kind in ("anthropic", "gemini"):
        given["api_key"] = "sk-count-key"
    if kind == "bedrock":
        given |= {"region": "us-east-1", "api_key": join_key(AKID, AWS_TEST_KEYS[AKID])}
    if kind == "vertex":
        key_file = write_key_file(tmp_path / "sa.json", url + "/token")
        given |= {"project": "my-proj", "location": "us-central1", "credentials_file": str(key_file)}
    return ProviderConfig(**(given | fields))


async def _attempt(provider: ProviderConfig, model: str, request: dict[str, Any] | None = OPENAI) -> CountAttempt:
    spec = count_spec(provider, Target(provider="p", model=model, catalog_model="m"), timeout_s=5.0)
    async with httpx.AsyncClient() as client:
        return await provider_count(client, spec, MESSAGES, request)


async def _count(provider: ProviderConfig, model: str, request: dict[str, Any] | None = OPENAI) -> int | None:
    return (await _attempt(provider, model, request)).tokens


@pytest.mark.parametrize(
    ("kind", "model"),
    [
        ("anthropic", "claude-x"),
        ("gemini", "gemini-2.5-flash"),
        ("vertex", "gemini-2.5-flash"),
        ("vertex", "claude-sonnet-4@20250514"),
        ("bedrock", "anthropic.claude-3-haiku-20240307-v1:0"),
    ],
)
async def test_each_counting_family_asks_its_own_api(sim: str, tmp_path: Path, kind: str, model: str) -> None:
    assert kind in COUNTING_KINDS
    assert await _count(_provider(kind, sim, tmp_path), model) == 5  # system 2 + message 3


async def test_a_failure_is_none_not_an_exception(sim: str, tmp_path: Path) -> None:
    wrong_secret = join_key(AKID, "wrongSecret")
    assert await _count(_provider("bedrock", sim, tmp_path, api_key=wrong_secret), "m") is None  # 403
    assert await _count(_provider("bedrock", sim, tmp_path, api_key="not-a-key"), "m") is None  # no signing
    refused = write_key_file(
        tmp_path / "refused.json", sim + "/token", "sk-sim-revoked@my-proj.iam.gserviceaccount.com"
    )
    assert await _count(_provider("vertex", sim, tmp_path, credentials_file=str(refused)), "gemini-x") is None
    missing = _provider("vertex", sim, tmp_path, credentials_file=str(tmp_path / "missing.json"))
    assert await _count(missing, "gemini-x") is None
    assert await _count(_provider("gemini", sim, tmp_path), "g", request=None) is None  # no chat form
    assert await _count(_provider("vertex", sim, tmp_path), "claude-x", request=None) == 5  # Claude needs none
    assert await _count(_provider("gemini", "http://127.0.0.1:9", tmp_path), "g") is None  # unreachable


async def test_each_count_says_its_outcome_for_the_breaker_and_the_record(sim: str, tmp_path: Path) -> None:
    counted = await _attempt(_provider("anthropic", sim, tmp_path), "claude-x")
    assert counted.outcome is not None and classify(counted.outcome) is FailureKind.SUCCESS and counted.duration_ms > 0
    refused = await _attempt(_provider("bedrock", sim, tmp_path, api_key=join_key(AKID, "wrongSecret")), "m")
    assert refused.outcome is not None and refused.outcome.status == 403
    unreachable = await _attempt(_provider("gemini", "http://127.0.0.1:9", tmp_path), "g")
    assert unreachable.outcome is not None and classify(unreachable.outcome) is FailureKind.TRANSPORT
    no_form = await _attempt(_provider("gemini", sim, tmp_path), "g", request=None)
    assert no_form.tokens is None and no_form.outcome is None  # no call: says nothing of the provider


def test_bedrock_counts_the_converse_fields_count_tokens_reads() -> None:
    path, body = bedrock_count("arn:aws:bedrock:us-east-1:1:inference-profile/x", {**OPENAI, "max_tokens": 9})
    assert path == "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fx/count-tokens"
    assert json.loads(body) == {
        "input": {
            "converse": {
                "messages": [{"role": "user", "content": [{"text": "three words here"}]}],
                "system": [{"text": "be brief"}],
            }
        }
    }


def test_vertex_counts_gemini_by_count_tokens_and_claude_by_raw_predict(tmp_path: Path) -> None:
    provider = _provider("vertex", "https://v", tmp_path)
    gemini = count_spec(provider, Target(provider="v", model="gemini-2.5-flash", catalog_model="m"), timeout_s=1)
    path, body, field = vertex_count(gemini, MESSAGES, {**OPENAI, "tools": [], "tool_choice": "auto"})
    assert path == "/v1/projects/my-proj/locations/us-central1/publishers/google/models/gemini-2.5-flash:countTokens"
    assert set(body) == {"contents", "systemInstruction"} and field == "totalTokens"
    claude = count_spec(provider, Target(provider="v", model="claude-x@1", catalog_model="m"), timeout_s=1)
    path, body, field = vertex_count(claude, MESSAGES, None)
    assert path == "/v1/projects/my-proj/locations/us-central1/publishers/anthropic/models/count-tokens:rawPredict"
    assert body == {
        "model": "claude-x@1",
        "system": "be brief",
        "messages": MESSAGES["messages"],
        "anthropic_version": "vertex-2023-10-16",
    }
    assert field == "input_tokens"


async def test_a_kind_that_does_not_count_is_refused(tmp_path: Path) -> None:
    spec = count_spec(
        _provider("openai", "https://o", tmp_path), Target(provider="o", model="g", catalog_model="m"), timeout_s=1
    )
    async with httpx.AsyncClient() as client:
        with pytest.raises(ValueError):
            count_request(client, spec, MESSAGES, OPENAI)
