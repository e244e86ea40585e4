"""Gemini and Vertex AI offers through the whole fleet with the official openai SDK as the client:
ingress → Redis → worker → the simulator's Gemini routes (`/v1beta/models/{model}:...`,
`x-goog-api-key`) and Vertex AI routes (`/v1/projects/.../publishers/{google,anthropic}/...`,
an access token from the simulator's token endpoint, named as `token_uri` in a service-account
key file). Chat, streams, a tool round trip, JSON schema output and embeddings are translated; a
RESOURCE_EXHAUSTED with a 20 s `retryDelay` falls over and rests its target fleet-wide; a safety
block is a content-policy 400, not retried; Claude is served on Vertex AI by `rawPredict`; a
service account the token endpoint refuses fails over no request to the provider; a tenant's
own Gemini key is the one sent; count_tokens asks Gemini's and Vertex AI's own counts; Vertex AI
embeds by `:predict`."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

from support.gateway import KEY, Gateway, running_gateway
from support.google_keys import write_key_file
from support.tenancy import Admin, tenancy_env, wait_for

pytestmark = pytest.mark.integration

TENANT = "tk-test-gemini-tenant-0001"
"""A key of an org that registered its own Gemini key for `gem-b`."""
TENANT_GEMINI_KEY = "AIza-tenant-own-key-01"

CONFIG = """\
providers:
  gem-a: {{kind: gemini, base_url: "{sim}", api_key: AIza-key-a}}
  gem-b: {{kind: gemini, base_url: "{sim}", api_key: AIza-key-b}}
  vertex: {{kind: vertex, base_url: "{sim}", project: my-proj, location: us-central1, credentials_file: "{key_file}"}}
  vertex-refused: {{kind: vertex, base_url: "{sim}", project: my-proj, location: us-east5, credentials_file: "{refused_file}"}}
models:
  flash:
    offers: [{{provider: gem-a, model: flash-a}}]
  flash-limited:
    order: priority
    offers: [{{provider: gem-a, model: "flash-l~429ra20,200"}}, {{provider: gem-b, model: flash-lb}}]
  flash-safety:
    order: priority
    offers: [{{provider: gem-a, model: "flash-s~safety"}}, {{provider: gem-b, model: flash-sb}}]
  flash-own:
    offers: [{{provider: gem-b, model: flash-own}}]
  vertex-flash:
    offers: [{{provider: vertex, model: gemini-2.5-flash}}]
  vertex-claude:
    offers: [{{provider: vertex, model: claude-sonnet-4@20250514}}]
  vertex-refused:
    offers: [{{provider: vertex-refused, model: gemini-refused}}]
  vertex-embed:
    type: embedding
    order: priority
    offers: [{{provider: vertex, model: "text-embedding-v~503"}}, {{provider: vertex, model: text-embedding-005}}, {{provider: gem-a, model: embed-after-vertex}}]
  gem-embed:
    type: embedding
    order: priority
    offers: [{{provider: gem-a, model: "embed-a~503"}}, {{provider: gem-b, model: embed-b}}]
policy:
  retry: {{base_ms: 250, max_ms: 4000}}
breaker: {{consecutive_failures: 1000000, sole_consecutive_failures: 1000000, failure_rate: 2.0, sole_failure_rate: 2.0}}
orgs:
  acme:
    keys:
      - {{name: main, key: {key}}}
  tenant:
    provider_keys: {{gem-b: {tenant_gemini_key}}}
    keys:
      - {{name: own, key: {tenant}}}
"""

HELLO: list[ChatCompletionMessageParam] = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "hello"},
]
WEATHER: ChatCompletionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def _key_files(workdir: Path, sim_url: str) -> dict[str, str]:
    key = write_key_file(workdir / "sa.json", sim_url + "/token")
    refused = write_key_file(
        workdir / "refused.json", sim_url + "/token", "sk-sim-revoked@my-proj.iam.gserviceaccount.com"
    )
    return {"key_file": str(key), "refused_file": str(refused)}


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return tenancy_env()  # the operator key, and a secret key: a tenant's key is kept sealed


@pytest.fixture(scope="module")
def gw(env: dict[str, str]) -> Iterator[Gateway]:
    with running_gateway(
        CONFIG, env=env, prepare=_key_files, key=KEY, tenant=TENANT, tenant_gemini_key=TENANT_GEMINI_KEY
    ) as gateway:
        yield gateway


def _fingerprint(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:8]


def _sent(gw: Gateway, model: str) -> list[dict[str, Any]]:
    """The bodies the simulator received for upstream `model`, decoded."""
    return [json.loads(str(e["received"]["body"])) for e in gw.sim_log(model)]  # type: ignore[index]


def test_a_chat_is_translated_to_generate_content_with_the_key_header(gw: Gateway) -> None:
    raw = gw.client().chat.completions.with_raw_response.create(model="flash", messages=HELLO, max_tokens=3)
    answer = raw.parse()
    assert answer.choices[0].message.content == "tok0 tok1 tok2" and answer.choices[0].finish_reason == "stop"
    assert answer.usage is not None and answer.usage.completion_tokens == 3
    assert raw.headers["x-turnout-provider"] == "gem-a"
    [entry] = gw.sim_log("flash-a")
    assert entry["auth_fingerprint"] == _fingerprint("AIza-key-a")
    [sent] = _sent(gw, "flash-a")
    assert sent["systemInstruction"] == {"parts": [{"text": "be brief"}]}
    assert sent["contents"] == [{"role": "user", "parts": [{"text": "hello"}]}]
    assert sent["generationConfig"] == {"maxOutputTokens": 3}


def test_a_stream_comes_chunk_by_chunk(gw: Gateway) -> None:
    stream = gw.client().chat.completions.create(model="flash", messages=HELLO, max_tokens=4, stream=True)
    chunks = list(stream)
    text = "".join(c.delta.content or "" for chunk in chunks for c in chunk.choices)
    assert text == "tok0 tok1 tok2 tok3"
    assert [c.finish_reason for chunk in chunks for c in chunk.choices if c.finish_reason] == ["stop"]
    assert gw.sim_log("flash-a")[-1]["stream"] is True


def test_a_tool_call_round_trip(gw: Gateway) -> None:
    client = gw.client()
    first = client.chat.completions.create(model="flash", messages=HELLO, tools=[WEATHER], tool_choice="required")
    message = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls" and message.tool_calls
    call = message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather" and call.id
    assert json.loads(call.function.arguments) == {"city": "sim"}
    follow = client.chat.completions.create(
        model="flash",
        messages=[
            *HELLO,
            message.model_dump(exclude_none=True),  # type: ignore[list-item]
            {"role": "tool", "tool_call_id": call.id, "content": '{"temperature": "22C"}'},
        ],
        tools=[WEATHER],
    )
    assert follow.choices[0].message.content == 'Tool result: {"temperature":"22C"}'
    sent = _sent(gw, "flash-a")
    assert sent[-2]["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    assert sent[-1]["contents"][-1] == {
        "role": "user",
        "parts": [{"functionResponse": {"name": "get_weather", "response": {"temperature": "22C"}}}],
    }


def test_json_schema_output_is_asked_with_the_schema(gw: Gateway) -> None:
    schema: dict[str, object] = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
    }
    gw.client().chat.completions.create(
        model="flash",
        messages=HELLO,
        response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema, "strict": True}},
    )
    config = _sent(gw, "flash-a")[-1]["generationConfig"]
    assert config == {"responseMimeType": "application/json", "responseJsonSchema": schema}


def test_resource_exhausted_with_a_retry_delay_falls_over_and_rests_the_target_fleet_wide(gw: Gateway) -> None:
    raw = gw.client().chat.completions.with_raw_response.create(model="flash-limited", messages=HELLO)
    assert (raw.headers["x-turnout-provider"], raw.headers["x-turnout-attempts"]) == ("gem-b", "2")
    again = gw.client().chat.completions.with_raw_response.create(model="flash-limited", messages=HELLO)
    assert again.headers["x-turnout-provider"] == "gem-b"  # gem-a rests its 20 s: not asked again
    assert [e["status"] for e in gw.sim_log("flash-l~429ra20,200")] == [429]
    assert [e["status"] for e in gw.sim_log("flash-lb")] == [200, 200]


def test_a_safety_block_is_a_content_policy_400_not_retried(gw: Gateway) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        gw.client().chat.completions.create(model="flash-safety", messages=HELLO)
    assert refused.value.status_code == 400 and refused.value.code == "content_filter"
    assert refused.value.response.headers["x-turnout-attempts"] == "1"
    assert [e["status"] for e in gw.sim_log("flash-s~safety")] == [200]
    assert gw.sim_log("flash-sb") == []


def test_vertex_gemini_with_a_service_account_whose_token_endpoint_is_the_simulator(gw: Gateway) -> None:
    answer = gw.client().chat.completions.create(model="vertex-flash", messages=HELLO, max_tokens=2)
    assert answer.choices[0].message.content == "tok0 tok1"
    stream = gw.client().chat.completions.create(model="vertex-flash", messages=HELLO, max_tokens=2, stream=True)
    assert "".join(c.delta.content or "" for chunk in stream for c in chunk.choices) == "tok0 tok1"
    assert [e["status"] for e in gw.sim_log("gemini-2.5-flash")] == [200, 200]


def test_claude_on_vertex_by_raw_predict(gw: Gateway) -> None:
    answer = gw.client().chat.completions.create(model="vertex-claude", messages=HELLO, max_tokens=3)
    assert answer.choices[0].message.content == "tok0 tok1 tok2"
    stream = gw.client().chat.completions.create(model="vertex-claude", messages=HELLO, max_tokens=2, stream=True)
    assert "".join(c.delta.content or "" for chunk in stream for c in chunk.choices) == "tok0 tok1"
    sent = _sent(gw, "claude-sonnet-4@20250514")
    assert [s["anthropic_version"] for s in sent] == ["vertex-2023-10-16"] * 2
    assert sent[0]["system"] == "be brief" and sent[1]["stream"] is True


def test_a_refused_service_account_is_a_credential_failure_without_a_model_call(gw: Gateway) -> None:
    with pytest.raises(openai.AuthenticationError) as failed:  # classified as the provider's 401
        gw.client().chat.completions.create(model="vertex-refused", messages=HELLO)
    assert "no access token from the service account's token endpoint (RefreshError)" in failed.value.message
    assert gw.sim_log("gemini-refused") == []


def test_count_tokens_on_the_messages_surface_asks_gemini(gw: Gateway) -> None:
    with anthropic.Anthropic(base_url=gw.base_url, api_key=KEY, max_retries=0) as claude:
        raw = claude.messages.with_raw_response.count_tokens(
            model="flash", system="be brief", messages=[{"role": "user", "content": "three words here"}]
        )
    assert raw.parse().input_tokens == 5  # the simulator counts words: system 2 + message 3
    assert raw.headers["x-turnout-count-source"] == "provider" and raw.headers["x-turnout-provider"] == "gem-a"


@pytest.mark.parametrize("model", ["vertex-flash", "vertex-claude"])
def test_count_tokens_asks_vertex_ai_for_gemini_and_claude_without_a_model_call(gw: Gateway, model: str) -> None:
    upstream = "gemini-2.5-flash" if model == "vertex-flash" else "claude-sonnet-4@20250514"
    before = len(gw.sim_log(upstream))
    with anthropic.Anthropic(base_url=gw.base_url, api_key=KEY, max_retries=0) as claude:
        raw = claude.messages.with_raw_response.count_tokens(
            model=model, system="be brief", messages=[{"role": "user", "content": "three words here"}]
        )
        refused = claude.messages.with_raw_response.count_tokens(
            model="vertex-refused", messages=[{"role": "user", "content": "hi"}]
        )
    assert raw.parse().input_tokens == 5  # the simulator counts words: system 2 + message 3
    assert raw.headers["x-turnout-count-source"] == "provider" and raw.headers["x-turnout-provider"] == "vertex"
    assert len(gw.sim_log(upstream)) == before  # counting is no model call
    assert refused.headers["x-turnout-count-source"] == "estimate"  # no token: estimated, no error


def test_vertex_embeddings_by_predict_fall_over_within_the_project(gw: Gateway) -> None:
    raw = gw.client().embeddings.with_raw_response.create(model="vertex-embed", input=["two words", "a"], dimensions=8)
    answer = raw.parse()
    assert [len(v.embedding) for v in answer.data] == [8, 8] and raw.headers["x-turnout-provider"] == "vertex"
    assert answer.usage.prompt_tokens == 3  # the predictions' token_count
    assert {e["status"] for e in gw.sim_log("text-embedding-v~503")} == {503}
    [sent] = _sent(gw, "text-embedding-005")[-1:]
    assert sent == {
        "instances": [{"content": "two words"}, {"content": "a"}],
        "parameters": {"outputDimensionality": 8},
    }
    assert gw.sim_log("embed-after-vertex") == []


def test_embeddings_fall_over_and_come_back_as_the_client_asked(gw: Gateway) -> None:
    raw = gw.client().embeddings.with_raw_response.create(model="gem-embed", input=["a", "b"], dimensions=8)
    vectors = raw.parse().data  # the SDK asked base64 and decoded it
    assert [len(v.embedding) for v in vectors] == [8, 8] and raw.headers["x-turnout-provider"] == "gem-b"
    assert {e["status"] for e in gw.sim_log("embed-a~503")} == {503}
    floats = gw.client().embeddings.create(model="gem-embed", input="a", dimensions=8, encoding_format="float")
    assert floats.data[0].embedding == pytest.approx(vectors[0].embedding, abs=1e-6)
    [sent] = _sent(gw, "embed-b")[-1:]
    assert sent["requests"][0] == {
        "model": "models/embed-b",
        "outputDimensionality": 8,
        "content": {"parts": [{"text": "a"}]},
    }


def test_a_tenants_own_gemini_key_is_the_one_sent(gw: Gateway) -> None:
    gw.client(TENANT).chat.completions.create(model="flash-own", messages=HELLO)
    assert [e["auth_fingerprint"] for e in gw.sim_log("flash-own")] == [_fingerprint(TENANT_GEMINI_KEY)]


def test_the_admin_api_adds_a_vertex_provider_only_with_its_fields(gw: Gateway, env: dict[str, str]) -> None:
    operator = Admin(gw.base_url, env["TURNOUT_OPERATOR_KEY"])
    spec = {"kind": "vertex", "base_url": gw.sim_url, "location": "us-central1", "credentials_file": "/sa.json"}
    refused = operator.call("PUT", "/catalog/providers/vertex-added", spec)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == "providers.vertex-added.project"
    made = operator.call("PUT", "/catalog/providers/vertex-added", {**spec, "project": "my-proj"})
    assert made.status_code == 200, made.text
    assert made.json()["providers"]["vertex-added"]["project"] == "my-proj"
    gemini = {"kind": "gemini", "base_url": gw.sim_url, "api_key": "AIza-added-key-1"}
    assert operator.call("PUT", "/catalog/providers/gem-added", gemini).status_code == 200
    put = operator.call("PUT", "/catalog/models/flash-added", {"offers": [{"provider": "gem-added", "model": "added"}]})
    assert put.status_code == 200, put.text

    def served() -> bool:
        try:
            gw.client().chat.completions.create(model="flash-added", messages=HELLO)
        except openai.APIStatusError:
            return False
        return True

    wait_for(served, 2.0, "a model on the Gemini provider added through the API")
    assert {e["auth_fingerprint"] for e in gw.sim_log("added")} == {_fingerprint("AIza-added-key-1")}
