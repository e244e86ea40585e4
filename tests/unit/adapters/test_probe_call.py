"""The cheap call of an active probe (`turnout.adapters.probe_call`) per family, against the
in-process simulator answering in each family's own format: `GET /models` on the OpenAI APIs and
Azure OpenAI, a one-token request elsewhere (translated, signed or given its access token as a
client's request is); classified as the attempt loop classifies (`turnout.core.classify`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from support.google_keys import write_key_file
from turnout.adapters.probe_call import TINY_REQUEST, models_request, probe_spec, send_probe
from turnout.aws.keys import join_key
from turnout.config import ProviderConfig
from turnout.config.providers import ProbeCall, ProbeConfig
from turnout.core.classify import classify
from turnout.core.types import FailureKind, Target
from turnout_sim.credentials import AWS_TEST_KEYS

AKID = "AKIASIMULATOR0000001"


def _provider(kind: str, url: str, tmp_path: Path) -> ProviderConfig:
    given: dict[str, Any] = {"kind": kind, "base_url": url, "api_key": "sk-probe-key"}
    if kind in ("openai", "openai_compatible"):
        given["base_url"] = url + "/v1"
    if kind == "azure_openai":
        given["api_version"] = "2024-10-21"
    if kind == "bedrock":
        given |= {"region": "us-east-1", "api_key": join_key(AKID, AWS_TEST_KEYS[AKID])}
    if kind == "vertex":
        key_file = write_key_file(tmp_path / "sa.json", url + "/token")
        given |= {"api_key": None, "project": "p", "location": "us-central1", "credentials_file": str(key_file)}
    return ProviderConfig(**given)


async def _probe(provider: ProviderConfig, model: str, call: ProbeCall) -> FailureKind:
    target = Target(provider="p", model=model, catalog_model="m")
    async with httpx.AsyncClient() as client:
        result = await send_probe(client, provider, target, call=call, timeout_s=5.0, request_id="probe-1")
    return classify(result.outcome)


KINDS = ["openai_compatible", "azure_openai", "anthropic", "gemini", "vertex", "bedrock"]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_probe_of_a_healthy_target_succeeds_and_of_a_down_one_fails(
    sim: str, tmp_path: Path, kind: str
) -> None:
    provider = _provider(kind, sim, tmp_path)
    call = ProbeConfig().call_for(provider.kind)
    healthy, down = ("gpt-4o", "gpt-4o") if call == "models" else ("m~200", "m~503")
    assert await _probe(provider, healthy, call) is FailureKind.SUCCESS
    if call == "tiny_request":
        assert await _probe(provider, down, call) is FailureKind.SERVER_ERROR


@pytest.mark.parametrize("kind", ["openai_compatible", "azure_openai"])
async def test_a_models_probe_with_a_bad_key_or_no_endpoint_fails_as_the_family_says(
    sim: str, tmp_path: Path, kind: str
) -> None:
    keyless = msgspec_replace(_provider(kind, sim, tmp_path), api_key="")
    assert await _probe(keyless, "m", "models") is FailureKind.AUTH
    nowhere = msgspec_replace(_provider(kind, sim, tmp_path), base_url="http://127.0.0.1:9/v1")
    assert await _probe(nowhere, "m", "models") is FailureKind.TRANSPORT


def msgspec_replace(provider: ProviderConfig, **fields: Any) -> ProviderConfig:
    return msgspec.structs.replace(provider, **fields)


def test_the_models_requests_are_each_apis_own() -> None:
    target = Target(provider="p", model="m", catalog_model="m")
    client = httpx.AsyncClient()
    azure = ProviderConfig(
        kind="azure_openai", base_url="https://r.openai.azure.com", api_key="k", api_version="2024-10-21"
    )
    request = models_request(client, probe_spec(azure, target, timeout_s=1.0, request_id="r"))
    assert str(request.url) == "https://r.openai.azure.com/openai/models?api-version=2024-10-21"
    assert request.method == "GET" and request.headers["api-key"] == "k" and "authorization" not in request.headers
    openai = ProviderConfig(kind="openai", base_url="https://api.openai.com/v1", api_key="sk")
    request = models_request(client, probe_spec(openai, target, timeout_s=1.0, request_id="r"))
    assert str(request.url) == "https://api.openai.com/v1/models"
    assert request.headers["authorization"] == "Bearer sk"


def test_the_tiny_request_asks_for_one_token_of_the_targets_model() -> None:
    target = Target(provider="p", model="gpt-4o-mini", catalog_model="m")
    spec = probe_spec(
        ProviderConfig(kind="openai", base_url="https://x/v1", api_key="sk"), target, timeout_s=1.0, request_id="r"
    )
    assert json.loads(spec.body) == {**TINY_REQUEST, "model": "gpt-4o-mini"}
    assert TINY_REQUEST["max_completion_tokens"] == 1
