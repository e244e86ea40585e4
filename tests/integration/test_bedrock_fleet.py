"""Amazon Bedrock offers through the whole fleet with the official openai SDK as the client:
ingress → Redis → worker → the simulator's Bedrock routes (`/model/{modelId}/converse`,
`/converse-stream`, SigV4 verified). Chat, streams and a tool round trip are served translated;
Bedrock throttling falls over to the Anthropic API; a guardrail is a content-policy 400 that is
not retried; "Input is too long" takes the context-window fallback; a tenant's own Bedrock keys
and, for a provider without keys, the environment's credentials are the ones that sign; count_tokens
on the Messages surface asks Bedrock's `CountTokens`, signed with the caller's keys."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

import anthropic
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam
from openai.types.chat.chat_completion_message_function_tool_call_param import Function
from openai.types.shared_params.response_format_json_schema import JSONSchema

from support.gateway import KEY, Gateway, running_gateway
from support.tenancy import Admin, tenancy_env, wait_for
from turnout.aws.keys import join_key
from turnout_sim.credentials import AWS_TEST_KEYS

pytestmark = pytest.mark.integration

FLEET_ID = "AKIASIMULATOR0000001"
TENANT_ID = "AKIASIMULATOR0000002"
CHAIN_ID = "AKIAENVIRONMENT00001"
"""The access key id the processes' environment gives botocore's credential chain."""
TENANT = "tk-test-bedrock-tenant-01"
CLAUDE = "anthropic.claude-3-5-sonnet-20240620-v1:0"

CONFIG = """\
providers:
  bedrock: {{kind: bedrock, base_url: "{sim}", region: us-east-1, access_key_id: {fleet_id}, secret_access_key: {fleet_secret}}}
  bedrock-chain: {{kind: bedrock, base_url: "{sim}", region: us-west-2}}
  anthropic: {{kind: anthropic, base_url: "{sim}", api_key: ant-key}}
  compat: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: compat-key}}
models:
  claude:
    offers: [{{provider: bedrock, model: "{claude}"}}]
  claude-x:
    order: priority
    offers: [{{provider: bedrock, model: "brx~429"}}, {{provider: anthropic, model: claude-x-direct}}]
  claude-guard:
    order: priority
    offers: [{{provider: bedrock, model: "brg~policy"}}, {{provider: anthropic, model: claude-g-direct}}]
  claude-small:
    offers: [{{provider: bedrock, model: "brc~ctx"}}]
  claude-large:
    offers: [{{provider: anthropic, model: claude-large-direct}}]
  claude-json:
    order: priority
    offers: [{{provider: bedrock, model: brj}}, {{provider: anthropic, model: claude-j-direct}}, {{provider: compat, model: json-j}}]
  claude-own:
    offers: [{{provider: bedrock, model: br-own}}]
  claude-broken:
    offers: [{{provider: bedrock, model: "brb~cut2"}}]
  claude-corrupt:
    offers: [{{provider: bedrock, model: "brk~badchunk3i20"}}]
  claude-stream-x:
    order: priority
    offers: [{{provider: bedrock, model: "brsx~bodyerr429"}}, {{provider: anthropic, model: claude-sx-direct}}]
  claude-chain:
    offers: [{{provider: bedrock-chain, model: br-chain}}]
policy:
  retry: {{base_ms: 250, max_ms: 1000}}
breaker: {{consecutive_failures: 1000000, sole_consecutive_failures: 1000000, failure_rate: 2.0, sole_failure_rate: 2.0}}
orgs:
  acme:
    settings:
      context_window_fallbacks: {{claude-small: [claude-large]}}
    keys:
      - {{name: main, key: {key}}}
  tenant:
    provider_keys: {{bedrock: "{tenant_key}"}}
    keys:
      - {{name: own, key: {tenant}}}
"""

HELLO: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hello"}]
WEATHER: ChatCompletionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return {  # the chain: botocore reads the environment before any file or role
        **tenancy_env(),
        "AWS_ACCESS_KEY_ID": CHAIN_ID,
        "AWS_SECRET_ACCESS_KEY": "environmentSecretKey",
        "AWS_CONFIG_FILE": "/nonexistent/aws-config",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


@pytest.fixture(scope="module")
def gw(env: dict[str, str]) -> Iterator[Gateway]:
    with running_gateway(
        CONFIG,
        env=env,
        key=KEY,
        tenant=TENANT,
        fleet_id=FLEET_ID,
        fleet_secret=AWS_TEST_KEYS[FLEET_ID],
        tenant_key=join_key(TENANT_ID, AWS_TEST_KEYS[TENANT_ID]),
        claude=CLAUDE,
    ) as gateway:
        yield gateway


def _fingerprint(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:8]


def test_a_chat_completion_is_served_by_bedrock_converse(gw: Gateway) -> None:
    raw = gw.client().chat.completions.with_raw_response.create(
        model="claude", messages=[{"role": "system", "content": "Be brief."}, *HELLO], max_tokens=3
    )
    answer = raw.parse()
    assert answer.choices[0].message.content == "tok0 tok1 tok2" and answer.choices[0].finish_reason == "stop"
    assert answer.usage is not None and answer.usage.completion_tokens == 3
    assert (raw.headers["x-turnout-provider"], raw.headers["x-turnout-attempts"]) == ("bedrock", "1")
    (entry,) = gw.sim_log(CLAUDE)
    received = entry["received"]
    assert isinstance(received, dict)
    sent = json.loads(str(received["body"]))
    assert sent == {
        "messages": [{"role": "user", "content": [{"text": "hello"}]}],
        "system": [{"text": "Be brief."}],
        "inferenceConfig": {"maxTokens": 3},
    }
    assert entry["auth_fingerprint"] == _fingerprint(FLEET_ID) and entry["status"] == 200


def test_a_stream_is_translated_from_the_event_stream(gw: Gateway) -> None:
    stream = gw.client().chat.completions.create(
        model="claude", messages=HELLO, max_tokens=4, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    text = "".join(c.delta.content or "" for chunk in chunks for c in chunk.choices)
    finish = [c.finish_reason for chunk in chunks for c in chunk.choices if c.finish_reason]
    assert (text, finish) == ("tok0 tok1 tok2 tok3", ["stop"])
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 4
    assert [e["stream"] for e in gw.sim_log(CLAUDE)][-1] is True


def test_a_tool_call_round_trip(gw: Gateway) -> None:
    client = gw.client()
    first = client.chat.completions.create(model="claude", messages=HELLO, tools=[WEATHER], tool_choice="required")
    (call,) = first.choices[0].message.tool_calls or []
    assert first.choices[0].finish_reason == "tool_calls" and call.type == "function"
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "sim"}
    function: Function = {"name": call.function.name, "arguments": call.function.arguments}
    history: list[ChatCompletionMessageParam] = [
        *HELLO,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call.id, "type": "function", "function": function}],
        },
        {"role": "tool", "tool_call_id": call.id, "content": "22C"},
    ]
    second = client.chat.completions.create(model="claude", messages=history, tools=[WEATHER])
    assert second.choices[0].message.content == "Tool result: 22C"
    streamed = client.chat.completions.create(
        model="claude", messages=HELLO, tools=[WEATHER], tool_choice="required", stream=True
    )
    arguments = "".join(
        t.function.arguments or ""
        for chunk in streamed
        for c in chunk.choices
        for t in c.delta.tool_calls or []
        if t.function is not None
    )
    assert json.loads(arguments) == {"city": "sim"}


@pytest.mark.parametrize(("model", "step"), [("claude-broken", "brb~cut2"), ("claude-corrupt", "brk~badchunk3i20")])
def test_a_stream_broken_after_its_first_content_ends_with_an_error(gw: Gateway, model: str, step: str) -> None:
    stream = gw.client().chat.completions.create(model=model, messages=HELLO, max_tokens=6, stream=True)
    text = ""
    with pytest.raises(openai.APIError):
        for chunk in stream:
            text += "".join(c.delta.content or "" for c in chunk.choices)
    assert text.startswith("tok0")  # the content before the break was relayed
    assert [e["status"] for e in gw.sim_log(step)] == [200]


def test_a_throttling_exception_event_before_content_falls_over_to_anthropic(gw: Gateway) -> None:
    stream = gw.client().chat.completions.with_raw_response.create(
        model="claude-stream-x", messages=HELLO, max_tokens=2, stream=True
    )
    assert stream.headers["x-turnout-provider"] == "anthropic"
    text = "".join(c.delta.content or "" for chunk in stream.parse() for c in chunk.choices)
    assert text == "tok0 tok1" and {e["status"] for e in gw.sim_log("brsx~bodyerr429")} == {200}


def test_bedrock_throttling_falls_over_to_the_anthropic_api(gw: Gateway) -> None:
    raw = gw.client().chat.completions.with_raw_response.create(model="claude-x", messages=HELLO, max_tokens=2)
    assert raw.parse().choices[0].message.content == "tok0 tok1"
    assert (raw.headers["x-turnout-provider"], raw.headers["x-turnout-model"]) == ("anthropic", "claude-x-direct")
    tried = [e["status"] for e in gw.sim_log("brx~429")]  # a throttle is retried before the fallback
    assert tried and set(tried) == {429} and raw.headers["x-turnout-attempts"] == str(len(tried) + 1)


def test_a_guardrail_is_a_content_policy_400_not_retried(gw: Gateway) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        gw.client().chat.completions.create(model="claude-guard", messages=HELLO)
    assert refused.value.status_code == 400 and refused.value.code == "content_filter"
    assert "guardrail_intervened" in refused.value.message
    assert refused.value.response.headers["x-turnout-attempts"] == "1"
    assert [e["status"] for e in gw.sim_log("brg~policy")] == [200]
    assert gw.sim_log("claude-g-direct") == []


def test_input_too_long_takes_the_context_window_fallback(gw: Gateway) -> None:
    raw = gw.client().chat.completions.with_raw_response.create(model="claude-small", messages=HELLO)
    assert raw.headers["x-turnout-model"] == "claude-large-direct" and raw.headers["x-turnout-attempts"] == "2"
    assert [e["status"] for e in gw.sim_log("brc~ctx")] == [400]


def test_a_json_schema_request_skips_bedrock_and_anthropic_for_an_offer_that_has_it(gw: Gateway) -> None:
    schema: JSONSchema = {"name": "answer", "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}
    raw = gw.client().chat.completions.with_raw_response.create(
        model="claude-json", messages=HELLO, response_format={"type": "json_schema", "json_schema": schema}
    )
    assert raw.headers["x-turnout-provider"] == "compat"  # the first offer whose API takes the schema
    assert gw.sim_log("brj") == []  # refused before any call: Converse has no structured output
    assert gw.sim_log("claude-j-direct") == []  # nor Anthropic's Messages: the answer would not follow it


def test_a_tenants_own_bedrock_keys_sign_its_calls(gw: Gateway) -> None:
    gw.client(TENANT).chat.completions.create(model="claude-own", messages=HELLO)
    gw.client().chat.completions.create(model="claude-own", messages=HELLO)
    assert [e["auth_fingerprint"] for e in gw.sim_log("br-own")] == [_fingerprint(TENANT_ID), _fingerprint(FLEET_ID)]


def test_a_provider_without_keys_signs_with_the_credential_chain(gw: Gateway) -> None:
    gw.client().chat.completions.create(model="claude-chain", messages=HELLO)
    (entry,) = gw.sim_log("br-chain")
    assert entry["auth_fingerprint"] == _fingerprint(CHAIN_ID) and entry["status"] == 200


def test_the_admin_api_adds_a_bedrock_provider_with_its_keys_sealed(gw: Gateway, env: dict[str, str]) -> None:
    operator = Admin(gw.base_url, env["TURNOUT_OPERATOR_KEY"])
    spec = {"kind": "bedrock", "base_url": gw.sim_url, "access_key_id": FLEET_ID}
    refused = operator.call("PUT", "/catalog/providers/bedrock-added", {**spec, "region": "us-east-1"})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == "providers.bedrock-added.access_key_id"
    spec["secret_access_key"] = AWS_TEST_KEYS[FLEET_ID]
    no_region = operator.call("PUT", "/catalog/providers/bedrock-added", spec)
    assert no_region.json()["error"]["param"] == "providers.bedrock-added.region"
    made = operator.call("PUT", "/catalog/providers/bedrock-added", {**spec, "region": "us-east-1"})
    assert made.status_code == 200, made.text
    shown = made.json()["providers"]["bedrock-added"]
    assert shown["region"] == "us-east-1" and shown["api_key"]["source"] == "sealed"
    assert AWS_TEST_KEYS[FLEET_ID] not in made.text
    put = operator.call(
        "PUT", "/catalog/models/claude-added", {"offers": [{"provider": "bedrock-added", "model": "added"}]}
    )
    assert put.status_code == 200, put.text

    def served() -> bool:
        try:
            gw.client().chat.completions.create(model="claude-added", messages=HELLO)
        except openai.APIStatusError:
            return False
        return True

    wait_for(served, 2.0, "a model on the Bedrock provider added through the API")
    assert {e["auth_fingerprint"] for e in gw.sim_log("added")} == {_fingerprint(FLEET_ID)}


def test_an_orgs_own_bedrock_key_is_refused_unless_of_the_keys_form(gw: Gateway, env: dict[str, str]) -> None:
    operator = Admin(gw.base_url, env["TURNOUT_OPERATOR_KEY"])
    refused = operator.call("PUT", "/orgs/acme/provider-keys/bedrock", {"api_key": "just-one-secret"})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == "api_key" and "ACCESS_KEY_ID:SECRET_ACCESS_KEY" in refused.text
    own = join_key(TENANT_ID, AWS_TEST_KEYS[TENANT_ID])
    made = operator.call("PUT", "/orgs/acme/provider-keys/bedrock", {"api_key": own})
    assert made.status_code == 200, made.text
    assert AWS_TEST_KEYS[TENANT_ID] not in made.text
    assert operator.call("DELETE", "/orgs/acme/provider-keys/bedrock").status_code == 200


@pytest.mark.parametrize(("key", "model"), [(KEY, "claude"), (TENANT, "claude-own"), (KEY, "claude-chain")])
def test_count_tokens_asks_bedrocks_count_tokens_signed_as_the_calls_are(gw: Gateway, key: str, model: str) -> None:
    """The fleet's keys, a tenant's own (both verified by the simulator) and the credential chain."""
    with anthropic.Anthropic(base_url=gw.base_url, api_key=key, max_retries=0) as claude:
        raw = claude.messages.with_raw_response.count_tokens(
            model=model, system="be brief", messages=[{"role": "user", "content": "three words here"}]
        )
    assert raw.parse().input_tokens == 5  # the simulator counts words: system 2 + message 3
    assert raw.headers["x-turnout-count-source"] == "provider"
    assert raw.headers["x-turnout-provider"] == ("bedrock-chain" if model == "claude-chain" else "bedrock")
