"""Azure OpenAI offers through the whole fleet with the official openai SDK as the client:
ingress → Redis → worker → the simulator's Azure routes (`/openai/deployments/{deployment}/...`,
`api-key`, `api-version`). A rate-limited deployment falls over to another, the content filter
is not retried and reaches the client as a content-policy 400, an Azure 503 falls over to an
`openai_compatible` offer, and a tenant's own Azure key is the one sent."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from support.gateway import KEY, Gateway, running_gateway
from support.tenancy import Admin, tenancy_env, wait_for

pytestmark = pytest.mark.integration

TENANT = "tk-test-azure-tenant-0001"
"""A key of an org that registered its own Azure key for `azure-west`."""
TENANT_AZURE_KEY = "tenant-own-azure-key-01"

CONFIG = """\
providers:
  azure-east: {{kind: azure_openai, base_url: "{sim}", api_key: az-east-key, api_version: "2024-10-21"}}
  azure-west: {{kind: azure_openai, base_url: "{sim}", api_key: az-west-key, api_version: "2024-10-21"}}
  compat: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-c}}
models:
  gpt-az:
    order: priority
    offers: [{{provider: azure-east, model: "east~429ra30"}}, {{provider: azure-west, model: west}}]
  gpt-az-retry:
    offers: [{{provider: azure-east, model: "eastr~429ra1,200"}}]
  gpt-filter:
    order: priority
    offers: [{{provider: azure-east, model: "eastf~cf400"}}, {{provider: azure-west, model: westf}}]
  gpt-filtered:
    order: priority
    offers: [{{provider: azure-east, model: "eastc~cf200"}}, {{provider: azure-west, model: westc}}]
  gpt-policy:
    offers: [{{provider: azure-east, model: "eastp~cf400"}}]
  safe:
    offers: [{{provider: compat, model: safe-model}}]
  gpt-cross:
    order: priority
    offers: [{{provider: azure-east, model: "eastx~503"}}, {{provider: compat, model: compat-x}}]
  gpt-stream:
    offers: [{{provider: azure-west, model: wests}}]
  gpt-own:
    offers: [{{provider: azure-west, model: west-own}}]
  emb-az:
    type: embedding
    order: priority
    offers: [{{provider: azure-east, model: "te3-east~503"}}, {{provider: azure-west, model: te3-west}}]
policy:
  retry: {{base_ms: 250, max_ms: 4000}}
breaker: {{consecutive_failures: 1000000, sole_consecutive_failures: 1000000, failure_rate: 2.0, sole_failure_rate: 2.0}}
orgs:
  acme:
    settings:
      content_policy_fallbacks: {{gpt-policy: [safe]}}
    keys:
      - {{name: main, key: {key}}}
  tenant:
    provider_keys: {{azure-west: {tenant_azure_key}}}
    keys:
      - {{name: own, key: {tenant}}}
"""

HELLO: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return tenancy_env()  # the operator key, and a secret key: a tenant's key is kept sealed


@pytest.fixture(scope="module")
def gw(env: dict[str, str]) -> Iterator[Gateway]:
    with running_gateway(CONFIG, env=env, key=KEY, tenant=TENANT, tenant_azure_key=TENANT_AZURE_KEY) as gateway:
        yield gateway


def _fingerprint(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:8]


def test_a_rate_limited_deployment_falls_over_to_another_azure_deployment(gw: Gateway) -> None:
    raw = gw.client().chat.completions.with_raw_response.create(model="gpt-az", messages=HELLO, max_tokens=3)
    assert raw.parse().choices[0].message.content == "tok0 tok1 tok2"
    assert (raw.headers["x-turnout-provider"], raw.headers["x-turnout-attempts"]) == ("azure-west", "2")
    assert [e["status"] for e in gw.sim_log("east~429ra30")] == [429]
    west = gw.sim_log("west")
    assert [e["status"] for e in west] == [200]
    assert west[0]["auth_fingerprint"] == _fingerprint("az-west-key")  # the api-key header, the provider's key


def test_a_short_retry_after_is_waited_on_the_same_deployment(gw: Gateway) -> None:
    raw = gw.client().chat.completions.with_raw_response.create(model="gpt-az-retry", messages=HELLO)
    assert raw.headers["x-turnout-attempts"] == "2"
    assert [e["status"] for e in gw.sim_log("eastr~429ra1,200")] == [429, 200]


def test_the_prompt_filter_is_not_retried_and_the_client_gets_a_content_policy_400(gw: Gateway) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        gw.client().chat.completions.create(model="gpt-filter", messages=HELLO)
    assert refused.value.status_code == 400 and refused.value.code == "content_filter"
    assert "content management policy" in refused.value.message
    assert refused.value.response.headers["x-turnout-attempts"] == "1"
    assert [e["status"] for e in gw.sim_log("eastf~cf400")] == [400]
    assert gw.sim_log("westf") == []  # a content-policy refusal is the request's, not the provider's


def test_a_completion_the_filter_ended_is_a_content_policy_400_too(gw: Gateway) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        gw.client().chat.completions.create(model="gpt-filtered", messages=HELLO)
    assert refused.value.code == "content_filter"
    assert [e["status"] for e in gw.sim_log("eastc~cf200")] == [200]
    assert gw.sim_log("westc") == []


def test_content_policy_fallbacks_take_over_after_the_filter(gw: Gateway) -> None:
    raw = gw.client().chat.completions.with_raw_response.create(model="gpt-policy", messages=HELLO)
    assert raw.headers["x-turnout-model"] == "safe-model" and raw.headers["x-turnout-attempts"] == "2"
    assert [e["status"] for e in gw.sim_log("eastp~cf400")] == [400]


def test_an_azure_503_falls_over_to_an_openai_compatible_offer(gw: Gateway) -> None:
    raw = gw.client().chat.completions.with_raw_response.create(model="gpt-cross", messages=HELLO)
    assert (raw.headers["x-turnout-provider"], raw.headers["x-turnout-model"]) == ("compat", "compat-x")
    tried = [e["status"] for e in gw.sim_log("eastx~503")]  # a 503 is retried before the fallback
    assert tried and set(tried) == {503} and raw.headers["x-turnout-attempts"] == str(len(tried) + 1)


def test_a_stream_from_an_azure_deployment(gw: Gateway) -> None:
    stream = gw.client().chat.completions.create(model="gpt-stream", messages=HELLO, max_tokens=4, stream=True)
    text = "".join(c.delta.content or "" for chunk in stream for c in chunk.choices)
    assert text == "tok0 tok1 tok2 tok3"
    assert [e["stream"] for e in gw.sim_log("wests")] == [True]


def test_embeddings_fall_over_between_azure_deployments(gw: Gateway) -> None:
    raw = gw.client().embeddings.with_raw_response.create(model="emb-az", input=["a", "b"])
    assert len(raw.parse().data) == 2
    assert raw.headers["x-turnout-provider"] == "azure-west"
    assert {e["status"] for e in gw.sim_log("te3-east~503")} == {503}


def test_a_tenants_own_azure_key_is_the_one_sent(gw: Gateway) -> None:
    gw.client(TENANT).chat.completions.create(model="gpt-own", messages=HELLO)
    assert [e["auth_fingerprint"] for e in gw.sim_log("west-own")] == [_fingerprint(TENANT_AZURE_KEY)]


def test_the_admin_api_adds_an_azure_provider_only_with_its_api_version(gw: Gateway, env: dict[str, str]) -> None:
    operator = Admin(gw.base_url, env["TURNOUT_OPERATOR_KEY"])
    spec = {"kind": "azure_openai", "base_url": gw.sim_url, "api_key": "az-added-key-0001"}
    refused = operator.call("PUT", "/catalog/providers/azure-added", spec)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == "providers.azure-added.api_version"
    made = operator.call("PUT", "/catalog/providers/azure-added", {**spec, "api_version": "2024-10-21"})
    assert made.status_code == 200, made.text
    assert made.json()["providers"]["azure-added"]["api_version"] == "2024-10-21"
    put = operator.call("PUT", "/catalog/models/gpt-added", {"offers": [{"provider": "azure-added", "model": "added"}]})
    assert put.status_code == 200, put.text

    def served() -> bool:
        try:
            gw.client().chat.completions.create(model="gpt-added", messages=HELLO)
        except openai.APIStatusError:
            return False
        return True

    wait_for(served, 2.0, "a model on the Azure provider added through the API")
    assert {e["auth_fingerprint"] for e in gw.sim_log("added")} == {_fingerprint("az-added-key-0001")}
