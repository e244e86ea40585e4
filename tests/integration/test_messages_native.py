"""Same family, same bytes (SPEC §13) through the whole fleet: the official `anthropic` SDK
sends `/v1/messages` what Claude Code sends (a `system`-role message, `cache_control` on
system and message blocks, `thinking`, `metadata`, an unknown field, `anthropic-beta`), and
the simulator's attempt log shows what each Anthropic upstream received: the client's body
with only `model` changed, its `anthropic-beta` header as sent. Answers come back as the
upstream gave them, streams event for event; an OpenAI-family target still gets (and
answers through) the translation, or is skipped when the request has none."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from support.gateway import Gateway, start_gateway
from support.procs import Fleet, require_redis

pytestmark = pytest.mark.integration

KEY = "tk-test-native-00000001"
BETA = "prompt-caching-2024-07-31,interleaved-thinking-2025-05-14"

CONFIG = """\
providers:
  claude:  {{kind: anthropic, base_url: "{sim}", api_key: key-claude}}
  claude2: {{kind: anthropic, base_url: "{sim}", api_key: key-claude-2}}
  gpt:     {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-gpt}}
models:
  native:     {{offers: [{{provider: claude, model: nat-up}}]}}
  native-s:   {{offers: [{{provider: claude, model: nat-up-s}}]}}
  native-cut: {{offers: [{{provider: claude, model: "natcut~cut3"}}]}}
  failover:
    order: priority
    offers: [{{provider: claude, model: "fo1~529"}}, {{provider: claude2, model: fo-b}}]
  failover-s:
    order: priority
    offers: [{{provider: claude, model: "fos1~529"}}, {{provider: claude2, model: fos-b}}]
  crossed:    {{offers: [{{provider: gpt, model: crossed-up}}]}}
  crossed-s:  {{offers: [{{provider: gpt, model: crossed-up-s}}]}}
  mixed:
    order: priority
    offers: [{{provider: gpt, model: mixed-g}}, {{provider: claude, model: mixed-c}}]
policy:
  retry: {{base_ms: 250, max_ms: 500}}
orgs:
  acme:
    keys:
      - {{name: main, key: {key}}}
"""

SYSTEM: Any = [
    {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}},
    {"type": "text", "text": "Answer in tokens."},
]
MESSAGES: Any = [
    {"role": "system", "content": "The project is Turnout."},
    {"role": "user", "content": [{"type": "text", "text": "hello there", "cache_control": {"type": "ephemeral"}}]},
]
EXTRAS: Any = {
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "metadata": {"user_id": "user-42"},
    "extra_body": {"unknown_future_field": {"keep": [1, 2.5, "three"]}, "top_k": 5},
    "extra_headers": {"anthropic-beta": BETA},
}


def _text(n: int) -> str:
    return " ".join(f"tok{i}" for i in range(n))


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    """Redis + simulator + ingress + one worker with two Anthropic providers and an OpenAI one."""
    require_redis()
    fleet = Fleet()
    try:
        gateway = start_gateway(fleet, CONFIG, key=KEY)
        yield gateway
        gateway.close()
    finally:
        fleet.stop_all()


@pytest.fixture(scope="module")
def claude(gw: Gateway) -> Iterator[anthropic.Anthropic]:
    client = anthropic.Anthropic(base_url=gw.base_url, api_key=KEY, max_retries=0)
    yield client
    client.close()


def _received(gw: Gateway, upstream_model: str) -> list[dict[str, Any]]:
    """What each attempt on `upstream_model` carried (`received`: body as text, `anthropic-*` headers)."""
    return [entry["received"] for entry in gw.sim_log(upstream_model)]  # type: ignore[misc]


def _assert_sent_as_is(received: dict[str, Any], sent: Any, upstream_model: str) -> None:
    """The upstream got the client's body with only `model` changed, and its `anthropic-beta`
    and `anthropic-version` byte for byte (`sent`: the SDK's request, an `httpx.Request`)."""
    client_body = json.loads(sent.content)
    upstream_body = json.loads(received["body"])
    assert upstream_body == {**client_body, "model": upstream_model}
    assert list(upstream_body) == list(client_body)  # every field, in the client's order
    assert received["headers"]["anthropic-beta"] == sent.headers["anthropic-beta"] == BETA
    assert received["headers"]["anthropic-version"] == sent.headers["anthropic-version"]


def _sse(lines: Iterator[str]) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) of every event of a raw SSE body."""
    events: list[tuple[str, dict[str, Any]]] = []
    name = ""
    for line in lines:
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            events.append((name, json.loads(line[6:])))
            name = ""
    return events


def test_claude_code_request_reaches_the_anthropic_upstream_as_sent(gw: Gateway, claude: anthropic.Anthropic) -> None:
    raw = claude.messages.with_raw_response.create(
        model="native", max_tokens=6, system=SYSTEM, messages=MESSAGES, **EXTRAS
    )
    message = raw.parse()
    [received] = _received(gw, "nat-up")
    _assert_sent_as_is(received, raw.http_request, "nat-up")
    assert json.loads(raw.http_request.content)["messages"][0]["role"] == "system"
    # the answer is the upstream's message as is: its model, its id, its usage with the cache fields
    answer = json.loads(raw.http_response.content)
    assert answer["id"].startswith("msg_sim") and answer["model"] == "nat-up"
    assert answer["usage"] == {
        "input_tokens": 11,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 6,
    }
    assert message.content[0].text == _text(6)
    assert raw.headers["x-turnout-provider"] == "claude" and raw.headers["x-turnout-model"] == "nat-up"


def test_claude_code_stream_is_relayed_event_for_event(gw: Gateway, claude: anthropic.Anthropic) -> None:
    with claude.messages.with_streaming_response.create(
        model="native-s", max_tokens=4, system=SYSTEM, messages=MESSAGES, stream=True, **EXTRAS
    ) as response:
        sent = response.http_request
        events = _sse(response.iter_lines())
        assert response.headers["x-turnout-provider"] == "claude"
    [received] = _received(gw, "nat-up-s")
    _assert_sent_as_is(received, sent, "nat-up-s")
    names = [name for name, _ in events]
    assert names == [
        "message_start",
        "content_block_start",
        "ping",  # the upstream's own events, pings included
        *["content_block_delta"] * 4,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    start = events[0][1]["message"]
    assert start["id"].startswith("msg_sim") and start["model"] == "nat-up-s"
    assert start["usage"] == {
        "input_tokens": 11,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 1,  # what the upstream's message_start says, not a gateway's zero
    }
    text = "".join(data["delta"]["text"] for name, data in events if name == "content_block_delta")
    assert text == _text(4)
    with claude.messages.stream(model="native-s", max_tokens=3, messages=MESSAGES, **EXTRAS) as stream:
        assert "".join(stream.text_stream) == _text(3)
        assert stream.get_final_message().usage.output_tokens == 3


def test_a_native_stream_cut_after_content_ends_with_an_anthropic_error_event(
    gw: Gateway, claude: anthropic.Anthropic
) -> None:
    with claude.messages.with_streaming_response.create(
        model="native-cut", max_tokens=10, messages=MESSAGES, stream=True, **EXTRAS
    ) as response:
        events = _sse(response.iter_lines())
    names = [name for name, _ in events]
    assert names[0] == "message_start" and "message_stop" not in names
    name, data = events[-1]
    said = data["error"]["message"]  # a cut is read as an early end or as a failed read
    assert (name, data) == ("error", {"type": "error", "error": {"type": "api_error", "message": said}})
    assert "ended before the answer was complete" in said or "failed mid-stream" in said


@pytest.mark.parametrize(("model", "first", "second"), [("failover", "fo1~529", "fo-b")])
def test_failover_between_anthropic_providers_sends_each_the_clients_bytes(
    gw: Gateway, claude: anthropic.Anthropic, model: str, first: str, second: str
) -> None:
    raw = claude.messages.with_raw_response.create(
        model=model, max_tokens=5, system=SYSTEM, messages=MESSAGES, **EXTRAS
    )
    assert raw.parse().content[0].text == _text(5)
    assert raw.headers["x-turnout-provider"] == "claude2" and raw.headers["x-turnout-fallback"] == "1"
    assert raw.headers["x-turnout-attempts"] == "3"
    assert [e["status"] for e in gw.sim_log(first)] == [529, 529]
    for received in _received(gw, first):
        _assert_sent_as_is(received, raw.http_request, first)
    [served] = _received(gw, second)
    _assert_sent_as_is(served, raw.http_request, second)


def test_stream_failover_between_anthropic_providers_sends_each_the_clients_bytes(
    gw: Gateway, claude: anthropic.Anthropic
) -> None:
    with claude.messages.with_streaming_response.create(
        model="failover-s", max_tokens=3, messages=MESSAGES, stream=True, **EXTRAS
    ) as response:
        sent = response.http_request
        events = _sse(response.iter_lines())
        assert response.headers["x-turnout-provider"] == "claude2"
    assert [name for name, _ in events][-1] == "message_stop"
    assert events[0][1]["message"]["model"] == "fos-b"  # only the serving upstream's stream reached the client
    assert [e["status"] for e in gw.sim_log("fos1~529")] == [529, 529]
    for received in [*_received(gw, "fos1~529"), *_received(gw, "fos-b")]:
        _assert_sent_as_is(received, sent, json.loads(received["body"])["model"])


def test_an_openai_target_still_gets_the_translation(gw: Gateway, claude: anthropic.Anthropic) -> None:
    raw = claude.messages.with_raw_response.create(
        model="crossed", max_tokens=4, system=SYSTEM, messages=MESSAGES, **EXTRAS
    )
    message = raw.parse()
    assert message.id.startswith("msg_chatcmpl")  # an OpenAI completion, translated back
    assert message.content[0].text == _text(4)
    assert message.usage.cache_read_input_tokens == 0 and message.usage.output_tokens == 4
    assert raw.headers["x-turnout-provider"] == "gpt"
    [entry] = gw.sim_log("crossed-up")
    assert entry["status"] == 200 and "received" not in entry
    with claude.messages.stream(model="crossed-s", max_tokens=3, messages=MESSAGES, **EXTRAS) as stream:
        assert "".join(stream.text_stream) == _text(3)
        assert stream.get_final_message().stop_reason == "end_turn"


DOCUMENT: Any = [
    {
        "role": "user",
        "content": [
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "notes"}},
            {"type": "text", "text": "summarise"},
        ],
    }
]


def test_a_block_without_translation_skips_the_openai_target_and_the_anthropic_one_serves(
    gw: Gateway, claude: anthropic.Anthropic
) -> None:
    raw = claude.messages.with_raw_response.create(model="mixed", max_tokens=3, messages=DOCUMENT)
    assert raw.parse().content[0].text == _text(3)  # type: ignore[union-attr]
    assert raw.headers["x-turnout-provider"] == "claude" and raw.headers["x-turnout-attempts"] == "1"
    assert gw.sim_log("mixed-g") == []  # never sent a lossy translation
    [received] = _received(gw, "mixed-c")
    assert json.loads(received["body"])["messages"] == DOCUMENT
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.messages.create(model="crossed", max_tokens=3, messages=DOCUMENT)
    error = refused.value.body["error"]  # type: ignore[index]
    assert error["type"] == "invalid_request_error" and "messages.0.content.0" in error["message"]
