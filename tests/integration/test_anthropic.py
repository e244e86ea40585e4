"""Anthropic through the whole fleet: the official `openai` SDK against Anthropic
upstreams, and the official `anthropic` SDK against `/v1/messages` with OpenAI
and Anthropic upstreams (ingress → Redis → worker → simulator, and the
streaming direct path)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionMessageFunctionToolCall

from support.gateway import Gateway, start_gateway
from support.procs import Fleet, require_redis

pytestmark = pytest.mark.integration

KEY = "tk-test-anthropic-0000001"

CONFIG = """\
providers:
  claude: {{kind: anthropic, base_url: "{sim}", api_key: key-claude}}
  gpt:    {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-gpt}}
models:
  claude-ok:       {{offers: [{{provider: claude, model: claude-ok}}]}}
  claude-ok-s:     {{offers: [{{provider: claude, model: claude-ok-s}}]}}
  claude-tools:    {{offers: [{{provider: claude, model: claude-tools}}]}}
  claude-msg:      {{offers: [{{provider: claude, model: claude-msg}}]}}
  claude-msg-s:    {{offers: [{{provider: claude, model: claude-msg-s}}]}}
  gpt-msg:         {{offers: [{{provider: gpt, model: gpt-msg}}]}}
  gpt-msg-s:       {{offers: [{{provider: gpt, model: gpt-msg-s}}]}}
  claude-529:      {{offers: [{{provider: claude, model: "c529~529"}}]}}
  claude-529-m:    {{offers: [{{provider: claude, model: "c529m~529"}}]}}
  claude-overload: {{offers: [{{provider: claude, model: "cover~bodyerr"}}]}}
  claude-over-m:   {{offers: [{{provider: claude, model: "coverm~bodyerr"}}]}}
  claude-400:      {{offers: [{{provider: claude, model: "c400~400"}}]}}
  claude-cut:      {{offers: [{{provider: claude, model: "ccut~cut3"}}]}}
  claude-long:     {{offers: [{{provider: claude, model: "clong~len20"}}]}}
  gpt-long:        {{offers: [{{provider: gpt, model: "glong~len20"}}]}}
  gpt-down:        {{offers: [{{provider: gpt, model: "gdown~503"}}]}}
  gpt-backup:      {{offers: [{{provider: gpt, model: gpt-backup}}]}}
  gpt-backup-m:    {{offers: [{{provider: gpt, model: gpt-backup-m}}]}}
  gpt-backup-s:    {{offers: [{{provider: gpt, model: gpt-backup-s}}]}}
  gpt-backup-sm:   {{offers: [{{provider: gpt, model: gpt-backup-sm}}]}}
policy:
  retry: {{base_ms: 250, max_ms: 1000}}
orgs:
  acme:
    settings:
      fallbacks:
        claude-529: [gpt-backup]
        claude-529-m: [gpt-backup-m]
        claude-overload: [gpt-backup-s]
        claude-over-m: [gpt-backup-sm]
    keys:
      - {{name: main, key: {key}}}
"""

USER: Any = [{"role": "user", "content": "hello"}]


def _text(n: int) -> str:
    return " ".join(f"tok{i}" for i in range(n))


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    """Redis + simulator + ingress + one worker with Anthropic and OpenAI providers."""
    require_redis()
    fleet = Fleet()
    try:
        gateway = start_gateway(fleet, CONFIG, key=KEY)
        yield gateway
        gateway.close()
    finally:
        fleet.stop_all()


@pytest.fixture(scope="module")
def oai(gw: Gateway) -> openai.OpenAI:
    return gw.client(KEY)


@pytest.fixture(scope="module")
def claude(gw: Gateway) -> Iterator[anthropic.Anthropic]:
    client = anthropic.Anthropic(base_url=gw.base_url, api_key=KEY, max_retries=0)
    yield client
    client.close()


# ------------------------------------------------ openai SDK -> Anthropic upstream


def test_openai_sdk_non_streaming_served_by_anthropic_upstream(gw: Gateway, oai: openai.OpenAI) -> None:
    raw = oai.chat.completions.with_raw_response.create(model="claude-ok", messages=USER, max_tokens=6)
    completion = raw.parse()
    assert completion.choices[0].message.content == _text(6)
    assert completion.choices[0].finish_reason == "stop"
    assert completion.id.startswith("msg_") and completion.object == "chat.completion"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (1, 6)  # type: ignore[union-attr]
    assert raw.headers["x-turnout-provider"] == "claude" and raw.headers["x-turnout-model"] == "claude-ok"
    [entry] = gw.sim_log("claude-ok")
    assert entry["status"] == 200 and entry["stream"] is False


def test_openai_sdk_streaming_served_by_anthropic_upstream(oai: openai.OpenAI) -> None:
    with oai.chat.completions.with_streaming_response.create(
        model="claude-ok-s",
        messages=USER,
        max_tokens=5,
        stream=True,
        stream_options={"include_usage": True},
    ) as response:
        headers = dict(response.headers)
        chunks = list(response.parse())
    assert headers["x-turnout-provider"] == "claude"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == _text(5)
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5


def test_openai_sdk_tool_call_from_anthropic_upstream(oai: openai.OpenAI) -> None:
    tools: list[ChatCompletionFunctionToolParam] = [
        {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}},
    ]
    completion = oai.chat.completions.create(
        model="claude-tools",
        messages=USER,
        max_tokens=3,
        tools=tools,
        tool_choice="required",
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert choice.message.tool_calls is not None
    [call] = choice.message.tool_calls
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert call.function.name == "lookup"
    assert json.loads(call.function.arguments) == {"answer": _text(3)}


def test_claude_529_twice_then_gpt_fallback_gives_one_answer(gw: Gateway, oai: openai.OpenAI) -> None:
    raw = oai.chat.completions.with_raw_response.create(model="claude-529", messages=USER, max_tokens=4)
    assert raw.parse().choices[0].message.content == _text(4)
    assert raw.headers["x-turnout-provider"] == "gpt" and raw.headers["x-turnout-model"] == "gpt-backup"
    assert raw.headers["x-turnout-fallback"] == "1" and raw.headers["x-turnout-attempts"] == "3"
    assert [e["status"] for e in gw.sim_log("c529~529")] == [529, 529]


def test_overloaded_error_as_first_stream_event_falls_back_unseen(gw: Gateway) -> None:
    frames: list[str] = []
    with httpx.stream(
        "POST",
        f"{gw.base_url}/v1/chat/completions",
        headers={"authorization": f"Bearer {KEY}"},
        json={"model": "claude-overload", "messages": USER, "stream": True, "max_tokens": 4},
        timeout=30,
    ) as response:
        assert response.status_code == 200
        headers = response.headers
        frames = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert headers["x-turnout-provider"] == "gpt" and headers["x-turnout-model"] == "gpt-backup-s"
    assert headers["x-turnout-fallback"] == "1"
    assert frames[-1] == "[DONE]"
    chunks = [json.loads(f) for f in frames[:-1]]
    assert all("error" not in c and c["id"].startswith("chatcmpl-") for c in chunks)  # only the fallback's stream
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == _text(4)
    assert [e["step"] for e in gw.sim_log("cover~bodyerr")] == ["bodyerr", "bodyerr"]


def test_terminal_anthropic_400_is_passed_on(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        oai.chat.completions.create(model="claude-400", messages=USER, max_tokens=4)
    assert "malformed" in caught.value.message


def test_stream_cut_after_content_ends_with_an_error_event(gw: Gateway) -> None:
    with httpx.stream(
        "POST",
        f"{gw.base_url}/v1/chat/completions",
        headers={"authorization": f"Bearer {KEY}"},
        json={"model": "claude-cut", "messages": USER, "stream": True, "max_tokens": 10},
        timeout=30,
    ) as response:
        frames = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert "[DONE]" not in frames
    assert json.loads(frames[-1])["error"]["code"] == "stream_interrupted"
    text = "".join(json.loads(f)["choices"][0]["delta"].get("content") or "" for f in frames[:-1])
    # the first token commits the stream, so it always arrives; the HTTP client drops what it had buffered
    # but not yet read when the connection breaks, so the tail before a cut may be lost, never repeated
    assert text.startswith("tok0") and _text(3).startswith(text)


def test_anthropic_max_tokens_cut_reaches_the_openai_sdk_as_length(oai: openai.OpenAI) -> None:
    completion = oai.chat.completions.create(model="claude-long", messages=USER, max_tokens=5)
    assert completion.choices[0].message.content == _text(5)
    assert completion.choices[0].finish_reason == "length"
    chunks = list(oai.chat.completions.create(model="claude-long", messages=USER, max_tokens=3, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == _text(3)
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["length"]


# ----------------------------------------------------- anthropic SDK -> /v1/messages


@pytest.mark.parametrize(("model", "provider"), [("claude-msg", "claude"), ("gpt-msg", "gpt")])
def test_anthropic_sdk_non_streaming(claude: anthropic.Anthropic, model: str, provider: str) -> None:
    raw = claude.messages.with_raw_response.create(model=model, max_tokens=5, messages=USER)
    message = raw.parse()
    assert message.type == "message" and message.role == "assistant" and message.id.startswith("msg_")
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == _text(5)  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (1, 5)
    assert raw.headers["x-turnout-provider"] == provider and raw.headers["x-turnout-attempts"] == "1"


@pytest.mark.parametrize(("model", "provider"), [("claude-msg-s", "claude"), ("gpt-msg-s", "gpt")])
def test_anthropic_sdk_streaming(claude: anthropic.Anthropic, model: str, provider: str) -> None:
    with claude.messages.with_streaming_response.create(
        model=model,
        max_tokens=4,
        messages=USER,
        stream=True,
    ) as response:
        assert response.headers["x-turnout-provider"] == provider
        assert response.headers["content-type"].startswith("text/event-stream")
    with claude.messages.stream(model=model, max_tokens=4, messages=USER) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == _text(4)
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 4 and final.usage.input_tokens == 1


def test_openai_length_cut_reaches_the_anthropic_sdk_as_max_tokens(claude: anthropic.Anthropic) -> None:
    message = claude.messages.create(model="gpt-long", max_tokens=5, messages=USER)
    assert message.content[0].text == _text(5)  # type: ignore[union-attr]
    assert message.stop_reason == "max_tokens"
    with claude.messages.stream(model="gpt-long", max_tokens=3, messages=USER) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == _text(3) and final.stop_reason == "max_tokens"
    within = claude.messages.create(model="gpt-long", max_tokens=50, messages=USER)
    assert within.stop_reason == "end_turn" and within.usage.output_tokens == 20


def test_anthropic_sdk_529_twice_then_gpt_fallback(gw: Gateway, claude: anthropic.Anthropic) -> None:
    raw = claude.messages.with_raw_response.create(model="claude-529-m", max_tokens=3, messages=USER)
    assert raw.parse().content[0].text == _text(3)  # type: ignore[union-attr]
    assert raw.headers["x-turnout-provider"] == "gpt" and raw.headers["x-turnout-fallback"] == "1"
    assert raw.headers["x-turnout-attempts"] == "3"
    assert len(gw.sim_log("c529m~529")) == 2


def test_anthropic_sdk_stream_overloaded_first_event_sees_only_the_fallback(claude: anthropic.Anthropic) -> None:
    with claude.messages.stream(model="claude-over-m", max_tokens=3, messages=USER) as stream:
        events = [e.type for e in stream]
        final = stream.get_final_message()
    assert "error" not in events and events[0] == "message_start" and events[-1] == "message_stop"
    assert final.content[0].text == _text(3)  # type: ignore[union-attr]
    assert final.model == "gpt-backup-sm"


def test_anthropic_sdk_tool_use_through_the_gateway(claude: anthropic.Anthropic) -> None:
    tools: Any = [{"name": "lookup", "description": "find", "input_schema": {"type": "object"}}]
    message = claude.messages.create(
        model="claude-tools",
        max_tokens=2,
        messages=USER,
        tools=tools,
        tool_choice={"type": "tool", "name": "lookup"},
    )
    assert message.stop_reason == "tool_use"
    [block] = message.content
    assert isinstance(block, anthropic.types.ToolUseBlock)
    assert block.name == "lookup" and block.input == {"answer": _text(2)}


def test_anthropic_sdk_errors_are_in_anthropic_shape(gw: Gateway, claude: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError) as missing:
        claude.messages.create(model="no-such-model", max_tokens=3, messages=USER)
    assert missing.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    with pytest.raises(anthropic.BadRequestError) as terminal:
        claude.messages.create(model="claude-400", max_tokens=3, messages=USER)
    assert terminal.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    with pytest.raises(anthropic.APIStatusError) as failed:
        claude.messages.create(model="gpt-down", max_tokens=3, messages=USER)
    assert failed.value.status_code == 502
    assert failed.value.response.headers["x-should-retry"] == "false"
    body = failed.value.response.json()
    assert body["type"] == "error" and body["error"]["type"] == "api_error"
    assert body["error"]["code"] == "provider_failed" and len(body["error"]["attempts"]) == 2
    bad_key = anthropic.Anthropic(base_url=gw.base_url, api_key="tk-wrong-key-000", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        bad_key.messages.create(model="claude-msg", max_tokens=3, messages=USER)
    bad_key.close()


@pytest.mark.parametrize(
    ("body", "headers", "status", "etype"),
    [
        ({"model": "claude-msg", "messages": USER}, {"x-api-key": KEY}, 400, "invalid_request_error"),
        (
            {"model": "claude-msg", "max_tokens": 3, "messages": USER},
            {"x-api-key": "nope-nope-nope"},
            401,
            "authentication_error",
        ),
        (
            {
                "model": "gpt-msg",  # an Anthropic target is sent it as is (test_messages_native)
                "max_tokens": 3,
                "messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}],
            },
            {"x-api-key": KEY},
            400,
            "invalid_request_error",
        ),
    ],
    ids=["no_max_tokens", "wrong_x_api_key", "unsupported_block"],
)
def test_messages_route_rejects_in_anthropic_shape(
    gw: Gateway, body: dict[str, Any], headers: dict[str, str], status: int, etype: str
) -> None:
    response = httpx.post(f"{gw.base_url}/v1/messages", json=body, headers=headers, timeout=10)
    assert response.status_code == status
    assert response.json()["type"] == "error" and response.json()["error"]["type"] == etype


# ------------------------------------------------ the rest of the Anthropic surface


def test_count_tokens_asks_the_anthropic_upstream(claude: anthropic.Anthropic) -> None:
    raw = claude.messages.with_raw_response.count_tokens(
        model="claude-ok", system="be brief", messages=[{"role": "user", "content": "three words here"}]
    )
    assert raw.parse().input_tokens == 5  # the simulator counts words: system 2 + message 3
    assert raw.headers["x-turnout-count-source"] == "provider" and raw.headers["x-turnout-provider"] == "claude"


def test_count_tokens_without_an_anthropic_offer_is_an_estimate(claude: anthropic.Anthropic) -> None:
    raw = claude.messages.with_raw_response.count_tokens(
        model="gpt-msg", messages=[{"role": "user", "content": "x" * 40}]
    )
    assert raw.parse().input_tokens == 10  # 40 characters / 4
    assert raw.headers["x-turnout-count-source"] == "estimate" and "x-turnout-provider" not in raw.headers


def test_count_tokens_errors_are_in_anthropic_shape(gw: Gateway, claude: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError) as missing:
        claude.messages.count_tokens(model="no-such-model", messages=USER)
    assert missing.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    response = httpx.post(
        f"{gw.base_url}/v1/messages/count_tokens", json={"model": "claude-ok"}, headers={"x-api-key": KEY}, timeout=10
    )
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"
    url, headers = f"{gw.base_url}/v1/messages/count_tokens", {"x-api-key": KEY, "content-type": "application/json"}
    for raw, says in [
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"model":"claude-ok","messages":[{"role":"user","content":"\\ud800"}]}', "lone UTF-16 surrogate"),
        (
            b'{"model":"claude-ok","messages":[{"role":"user","content":[{"type":"text"}]}]}',
            "messages.0.content.0.text: Field required",
        ),
    ]:
        bad = httpx.post(url, content=raw, headers=headers, timeout=10)
        body = bad.json()
        assert bad.status_code == 400 and body["type"] == "error", bad.text[:300]  # Anthropic's shape
        assert body["error"]["type"] == "invalid_request_error" and says in body["error"]["message"], body


def test_models_list_is_anthropic_shaped_for_anthropic_callers(gw: Gateway, claude: anthropic.Anthropic) -> None:
    ids = [m.id for m in claude.models.list()]
    assert "claude-ok" in ids and ids == sorted(ids)
    openai_shape = httpx.get(f"{gw.base_url}/v1/models", headers={"authorization": f"Bearer {KEY}"}).json()
    assert openai_shape["object"] == "list" and openai_shape["data"][0]["object"] == "model"


@pytest.mark.parametrize(
    ("method", "path", "status", "etype"),
    [
        ("POST", "/v1/messages/batches", 404, "not_found_error"),
        ("GET", "/v1/messages/abc/def", 404, "not_found_error"),
        ("GET", "/v1/messages", 405, "invalid_request_error"),
        ("GET", "/v1/messages/count_tokens", 405, "invalid_request_error"),
        ("DELETE", "/v1/messages/count_tokens", 405, "invalid_request_error"),
    ],
    ids=["unknown-subroute", "unknown-nested-get", "wrong-method", "count-tokens-get", "count-tokens-delete"],
)
def test_every_messages_path_answers_in_anthropic_shape(
    gw: Gateway, method: str, path: str, status: int, etype: str
) -> None:
    response = httpx.request(method, f"{gw.base_url}{path}", headers={"x-api-key": KEY}, json={}, timeout=10)
    assert response.status_code == status
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == etype and response.headers["x-request-id"]
    assert status != 405 or response.headers["allow"] == "POST"


def test_a_wrong_key_on_messages_is_told_to_use_x_api_key(gw: Gateway) -> None:
    bad_key = anthropic.Anthropic(base_url=gw.base_url, api_key="tk-wrong-key-000", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as info:
        bad_key.messages.create(model="claude-msg", max_tokens=3, messages=USER)
    bad_key.close()
    assert "x-api-key" in info.value.body["error"]["message"]  # type: ignore[index]


def test_a_wrong_key_listing_models_with_the_anthropic_sdk_is_told_to_use_x_api_key(gw: Gateway) -> None:
    bad_key = anthropic.Anthropic(base_url=gw.base_url, api_key="tk-wrong-key-000", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as info:
        bad_key.models.list()
    bad_key.close()
    body = info.value.body
    assert isinstance(body, dict) and body["type"] == "error" and body["request_id"]
    assert body["error"]["type"] == "authentication_error" and "x-api-key" in body["error"]["message"]


def _post_messages(gw: Gateway, key: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"{gw.base_url}/v1/messages",
        json=body,
        timeout=30,
        headers={"x-api-key": KEY, "anthropic-version": "2023-06-01", "idempotency-key": key},
    )


def test_idempotency_key_on_messages_replays_the_first_answer(gw: Gateway) -> None:
    body = {"model": "claude-msg", "max_tokens": 4, "messages": [{"role": "user", "content": "idempotent please"}]}
    before = len(gw.sim_log("claude-msg"))
    first = _post_messages(gw, "msg-key-1", body)
    again = _post_messages(gw, "msg-key-1", body)
    assert first.status_code == again.status_code == 200
    assert again.headers["x-turnout-idempotent-replay"] == "1" and "x-turnout-idempotent-replay" not in first.headers
    assert again.json() == first.json()
    assert len(gw.sim_log("claude-msg")) - before == 1
    other = _post_messages(gw, "msg-key-1", {**body, "max_tokens": 5})
    assert other.status_code == 409 and other.json()["error"]["type"] == "invalid_request_error"


def test_a_stream_is_never_replayed_a_reused_key_is_a_clear_409(gw: Gateway) -> None:
    body = {"model": "claude-msg-s", "max_tokens": 4, "stream": True, "messages": USER}
    assert _post_messages(gw, "stream-key-1", body).status_code == 200
    again = _post_messages(gw, "stream-key-1", body)
    assert again.status_code == 409
    assert again.json()["type"] == "error" and "streams are not replayed" in again.json()["error"]["message"]
