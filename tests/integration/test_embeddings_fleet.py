"""`POST /v1/embeddings` and `POST /v1/completions` through the whole fleet with the official openai SDK:
ingress → Redis → worker → simulator, the same attempt loop as chat."""

from __future__ import annotations

import base64
import struct
from collections.abc import Iterator

import httpx
import openai
import pytest

from support.gateway import KEY, Gateway, running_gateway

pytestmark = pytest.mark.integration

CONFIG = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
  sim-b: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-b}}
  claude: {{kind: anthropic, base_url: "{sim}", api_key: key-claude}}
models:
  emb:
    type: embedding
    order: priority
    offers: [{{provider: sim-a, model: "emb3~fail50"}}, {{provider: sim-b, model: emb3}}]
  emb-ok:
    type: embedding
    offers: [{{provider: sim-a, model: emb-ok}}]
  emb-down:
    type: embedding
    offers: [{{provider: sim-a, model: "embd~503"}}]
  emb-rate:
    type: embedding
    offers: [{{provider: sim-a, model: "embr~429ra1,200"}}]
  chat:
    offers: [{{provider: sim-b, model: chat-b}}]
  comp:
    order: priority
    offers: [{{provider: sim-a, model: "comp-a~503"}}, {{provider: sim-b, model: comp-b}}]
  comp-claude:
    order: priority
    offers: [{{provider: claude, model: claude-c}}, {{provider: sim-b, model: compc-b}}]
  claude-only:
    offers: [{{provider: claude, model: claude-o}}]
policy:
  retry: {{base_ms: 250, max_ms: 4000}}
breaker: {{consecutive_failures: 1000000, sole_consecutive_failures: 1000000, failure_rate: 2.0, sole_failure_rate: 2.0}}
orgs:
  acme:
    settings:
      fallbacks: [chat]
    keys:
      - {{name: main, key: {key}}}
  plain:
    keys:
      - {{name: plain, key: tk-test-plain-00000000001}}
      - {{name: limited, key: tk-test-limited-000000001, settings: {{limits: {{max_tokens: 10}}}}}}
"""
LIMITED = "tk-test-limited-000000001"
"""A key whose `limits.max_tokens` is 10."""
PLAIN = "tk-test-plain-00000000001"
"""A key of an org with no fallbacks."""


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    with running_gateway(CONFIG, key=KEY) as gateway:
        yield gateway


def _vector(encoded: str) -> list[float]:
    raw = base64.b64decode(encoded)
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def test_an_embedding_is_served_with_the_gateway_headers(gw: Gateway) -> None:
    raw = gw.client().embeddings.with_raw_response.create(model="emb-ok", input=["a cat", "a dog"], dimensions=64)
    answer = raw.parse()
    assert [len(d.embedding) for d in answer.data] == [64, 64]
    assert answer.usage.prompt_tokens > 0
    assert raw.headers["x-turnout-provider"] == "sim-a" and raw.headers["x-turnout-attempts"] == "1"


def test_base64_vectors_reach_the_client_as_the_provider_encoded_them(gw: Gateway) -> None:
    client = gw.client()
    floats = client.embeddings.create(model="emb-ok", input="same text", encoding_format="float")
    response = httpx.post(
        f"{gw.base_url}/v1/embeddings",
        json={"model": "emb-ok", "input": "same text", "encoding_format": "base64"},
        headers={"authorization": f"Bearer {KEY}"},
    )
    assert response.status_code == 200
    assert _vector(response.json()["data"][0]["embedding"]) == pytest.approx(floats.data[0].embedding, rel=1e-6)


def test_a_hundred_requests_with_the_first_provider_failing_half_are_all_served_by_the_same_model(gw: Gateway) -> None:
    client = gw.client()
    vectors: set[tuple[float, ...]] = set()
    served_by: dict[str, int] = {}
    for _ in range(100):
        raw = client.embeddings.with_raw_response.create(model="emb", input="the query")
        vectors.add(tuple(raw.parse().data[0].embedding))
        provider = raw.headers["x-turnout-provider"]
        served_by[provider] = served_by.get(provider, 0) + 1
        assert raw.headers["x-turnout-model"] in ("emb3~fail50", "emb3")  # never the org's chat fallback
    assert len(vectors) == 1  # one vector space: 0 cross-model answers
    assert served_by.get("sim-b", 0) > 0  # the failures did fall over, to the same model elsewhere
    assert gw.sim_log("chat-b") == []


def test_an_embedding_model_that_fails_never_falls_back_to_the_orgs_wildcard_chat_model(gw: Gateway) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        gw.client().embeddings.create(model="emb-down", input="x")
    assert caught.value.status_code in (502, 503)
    assert gw.sim_log("chat-b") == []


def test_a_retry_after_is_honoured_on_the_same_target(gw: Gateway) -> None:
    raw = gw.client().embeddings.with_raw_response.create(model="emb-rate", input="x")
    assert raw.headers["x-turnout-attempts"] == "2"
    assert [e["status"] for e in gw.sim_log("embr~429ra1,200")] == [429, 200]


def test_a_chat_model_on_the_embeddings_route_and_the_reverse_are_400s_naming_the_model(gw: Gateway) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        gw.client().embeddings.create(model="chat", input="x")
    assert caught.value.code == "wrong_model_type" and "`chat` is a chat model" in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        gw.client().chat.completions.create(model="emb-ok", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.code == "wrong_model_type" and "/v1/embeddings" in caught.value.message
    assert gw.sim_log("emb-ok") == [] or all(e["status"] == 200 for e in gw.sim_log("emb-ok"))


def test_bad_input_is_a_400_naming_the_field_and_an_unknown_model_a_404(gw: Gateway) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        gw.client().embeddings.create(model="emb-ok", input=["ok", ""])
    assert caught.value.param == "input[1]"
    with pytest.raises(openai.NotFoundError) as missing:
        gw.client().embeddings.create(model="no-such-embedder", input="x")
    assert missing.value.code == "model_not_found"


def test_the_embeddings_route_is_counted_under_its_own_label(gw: Gateway) -> None:
    gw.client().embeddings.create(model="emb-ok", input="counted")
    text = httpx.get(f"{gw.base_url}/metrics").text
    assert 'route="/v1/embeddings"' in text


def _refusals(gw: Gateway, route: str, status: str, code: str) -> float:
    for line in httpx.get(f"{gw.base_url}/metrics").text.splitlines():
        if line.startswith(f'turnout_door_refusals_total{{code="{code}",route="{route}",status="{status}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_refusals_at_the_door_are_counted_under_their_route_and_code(gw: Gateway) -> None:
    before = (
        _refusals(gw, "/v1/images", "404", "unknown_route"),
        _refusals(gw, "/v1/embeddings", "401", "invalid_api_key"),
        _refusals(gw, "/v1/embeddings", "400", "wrong_model_type"),
    )
    assert httpx.post(f"{gw.base_url}/v1/images/generations", json={}).status_code == 404
    assert httpx.post(f"{gw.base_url}/v1/embeddings", json={"model": "emb-ok", "input": "x"}).status_code == 401
    with pytest.raises(openai.BadRequestError):
        gw.client().embeddings.create(model="chat", input="x")
    after = (
        _refusals(gw, "/v1/images", "404", "unknown_route"),
        _refusals(gw, "/v1/embeddings", "401", "invalid_api_key"),
        _refusals(gw, "/v1/embeddings", "400", "wrong_model_type"),
    )
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1, 1]
    text = httpx.get(f"{gw.base_url}/metrics").text
    assert 'turnout_requests_total{route="/v1/images",status="404"}' in text


def test_a_legacy_completion_falls_over_to_the_second_provider(gw: Gateway) -> None:
    raw = gw.client().completions.with_raw_response.create(model="comp", prompt="def add(a, b):", max_tokens=5)
    answer = raw.parse()
    assert answer.object == "text_completion" and answer.choices[0].text
    assert raw.headers["x-turnout-provider"] == "sim-b" and raw.headers["x-turnout-fallback"] == "1"
    assert [e["status"] for e in gw.sim_log("comp-a~503")] == [503, 503]


def test_a_legacy_completion_streams_on_the_direct_path(gw: Gateway) -> None:
    pieces = [
        chunk.choices[0].text
        for chunk in gw.client().completions.create(model="comp", prompt="x", max_tokens=6, stream=True)
        if chunk.choices
    ]
    assert "".join(pieces).split() == [f"tok{i}" for i in range(6)]


def test_an_anthropic_offer_is_skipped_for_a_completion_and_a_model_with_no_other_is_a_400(gw: Gateway) -> None:
    """(acme's wildcard fallback would serve `claude-only` by `chat`: the 400 is asked of an org without one.)"""
    raw = gw.client().completions.with_raw_response.create(model="comp-claude", prompt="x", max_tokens=3)
    assert raw.headers["x-turnout-provider"] == "sim-b" and raw.headers["x-turnout-attempts"] == "1"
    with pytest.raises(openai.BadRequestError) as caught:
        gw.client(PLAIN).completions.create(model="claude-only", prompt="x", max_tokens=3)
    assert caught.value.code == "unsupported_by_providers"
    assert "completions" in caught.value.message


def test_a_limit_refusal_on_the_responses_route_names_the_field_the_client_sent(gw: Gateway) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        gw.client(LIMITED).responses.create(model="comp", input="x", max_output_tokens=11)
    assert caught.value.param == "max_output_tokens" and "`max_output_tokens`" in caught.value.message


def test_count_tokens_for_an_embedding_model_is_refused_as_messages_is(gw: Gateway) -> None:
    answer = httpx.post(
        f"{gw.base_url}/v1/messages/count_tokens",
        json={"model": "emb-ok", "messages": [{"role": "user", "content": "hi"}]},
        headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"},
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["type"] == "invalid_request_error"
    assert "embedding model" in answer.json()["error"]["message"]
