"""One Claude model sold by three sellers, through the whole fleet with the official openai SDK
as the client: Bedrock throttled (ThrottlingException, every call), then the Anthropic API
overloaded (503), then Claude on Vertex AI (`rawPredict`, an access token from the simulator's
token endpoint) serves; the client sees one answer, and a stream and a tool round trip cross the
same three wire formats."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

from support.gateway import KEY, Gateway, running_gateway
from support.google_keys import write_key_file
from support.tenancy import tenancy_env
from turnout_sim.credentials import AWS_TEST_KEYS

pytestmark = pytest.mark.integration

AWS_ID = "AKIASIMULATOR0000001"
CONFIG = """\
providers:
  bedrock: {{kind: bedrock, base_url: "{sim}", region: us-east-1, access_key_id: {aws_id}, secret_access_key: {aws_secret}}}
  anthropic: {{kind: anthropic, base_url: "{sim}", api_key: sk-ant-cross-0001}}
  vertex: {{kind: vertex, base_url: "{sim}", project: my-proj, location: us-east5, credentials_file: "{key_file}"}}
models:
  claude:
    order: priority
    offers:
      - {{provider: bedrock, model: "brt~429"}}
      - {{provider: anthropic, model: "claude-direct~503"}}
      - {{provider: vertex, model: claude-sonnet-4@20250514}}
policy:
  retry: {{base_ms: 0, max_retries: 1}}
breaker: {{consecutive_failures: 1000000, sole_consecutive_failures: 1000000, failure_rate: 2.0, sole_failure_rate: 2.0}}
orgs:
  acme:
    keys:
      - {{name: main, key: {key}}}
"""
HELLO: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hello"}]
WEATHER: ChatCompletionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def _key_file(workdir: Path, sim_url: str) -> dict[str, str]:
    return {"key_file": str(write_key_file(workdir / "sa.json", sim_url + "/token"))}


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    with running_gateway(
        CONFIG, env=tenancy_env(), prepare=_key_file, key=KEY, aws_id=AWS_ID, aws_secret=AWS_TEST_KEYS[AWS_ID]
    ) as gateway:
        yield gateway


def test_bedrock_throttled_then_anthropic_overloaded_then_vertex_claude_serves(gw: Gateway) -> None:
    raw = gw.client().chat.completions.with_raw_response.create(model="claude", messages=HELLO, max_tokens=3)
    assert raw.parse().choices[0].message.content == "tok0 tok1 tok2"
    assert (raw.headers["x-turnout-provider"], raw.headers["x-turnout-fallback"]) == ("vertex", "1")
    assert raw.headers["x-turnout-attempts"] == "4"  # the primary retried once, each fallback tried once
    assert [e["status"] for e in gw.sim_log("brt~429")] == [429, 429]
    assert [e["status"] for e in gw.sim_log("claude-direct~503")] == [503]


def test_a_stream_crosses_the_three_formats_to_the_one_that_serves(gw: Gateway) -> None:
    stream = gw.client().chat.completions.create(model="claude", messages=HELLO, max_tokens=4, stream=True)
    assert "".join(c.delta.content or "" for chunk in stream for c in chunk.choices) == "tok0 tok1 tok2 tok3"


def test_a_tool_round_trip_is_served_on_vertex_after_the_others_fail(gw: Gateway) -> None:
    client = gw.client()
    first = client.chat.completions.create(model="claude", messages=HELLO, tools=[WEATHER])
    [call] = first.choices[0].message.tool_calls or []
    assert call.type == "function"
    assert call.function.name == "get_weather" and "city" in json.loads(call.function.arguments)
    follow: list[ChatCompletionMessageParam] = [
        *HELLO,
        {"role": "assistant", "tool_calls": [call.model_dump()]},  # type: ignore[list-item]
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
    ]
    second = client.chat.completions.create(model="claude", messages=follow, tools=[WEATHER])
    assert second.choices[0].message.content == "Tool result: sunny"
