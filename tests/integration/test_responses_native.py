"""`api: responses` offers through the whole fleet with the official `openai` SDK: a
`/v1/responses` request goes to the simulator's own `/v1/responses` as the client sent it
(only `model`, `provider`, `previous_response_id` and `store` changed), failover between two
such offers (queued and streamed), a built-in `web_search` tool answered natively, a
follow-up whose stored turns are replayed as items, and the requests such offers refuse."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from support.gateway import Gateway, start_gateway
from support.procs import Fleet, require_redis

pytestmark = pytest.mark.integration

KEY = "tk-test-resp-native-0001"
BETA = "responses=experimental"

CONFIG = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
  sim-b: {{kind: openai, base_url: "{sim}/v1", api_key: key-b}}
models:
  rn-fail:
    order: priority
    offers: [{{provider: sim-a, model: "rnf-a~503", api: responses}}, {{provider: sim-b, model: rnf-b, api: responses}}]
  rn-fail-s:
    order: priority
    offers:
      - {{provider: sim-a, model: "rnfs-a~503", api: responses}}
      - {{provider: sim-b, model: rnfs-b, api: responses}}
  rn-ok:     {{offers: [{{provider: sim-a, model: rn-ok, api: responses}}]}}
  rn-search: {{offers: [{{provider: sim-a, model: rn-search, api: responses}}]}}
  rn-conv:   {{offers: [{{provider: sim-a, model: rn-conv, api: responses}}]}}
  rn-mixed:
    order: priority
    offers: [{{provider: sim-a, model: rnm-chat}}, {{provider: sim-b, model: rnm-resp, api: responses}}]
  rn-chat:   {{offers: [{{provider: sim-a, model: rn-chat}}]}}
  rn-failed:
    order: priority
    offers:
      - {{provider: sim-a, model: "rnx-a~bodyerr", api: responses}}
      - {{provider: sim-b, model: rnx-b, api: responses}}
  rn-cut:    {{offers: [{{provider: sim-a, model: "rncut~cut3", api: responses}}]}}
  rn-nodone: {{offers: [{{provider: sim-a, model: "rnnd~nodone", api: responses}}]}}
  rn-idem:   {{offers: [{{provider: sim-a, model: rn-idem, api: responses}}]}}
policy:
  retry: {{base_ms: 250, max_ms: 500}}
orgs:
  acme:
    keys:
      - {{name: main, key: {key}}}
"""

TOOL: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "strict": True,
}


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    """Redis + simulator + ingress + one worker."""
    require_redis()
    fleet = Fleet()
    try:
        gateway = start_gateway(fleet, CONFIG, key=KEY)
        yield gateway
        gateway.close()
    finally:
        fleet.stop_all()


@pytest.fixture(scope="module")
def client(gw: Gateway) -> openai.OpenAI:
    return gw.client(KEY)


def _received(gw: Gateway, upstream_model: str) -> list[dict[str, Any]]:
    """What each attempt on `upstream_model` carried (`body` decoded, `headers`)."""
    out = []
    for entry in gw.sim_log(upstream_model):
        received: Any = entry["received"]
        out.append({"body": json.loads(received["body"]), "headers": received["headers"]})
    return out


def test_create_fails_over_between_responses_offers_with_the_clients_body(gw: Gateway, client: openai.OpenAI) -> None:
    raw = client.responses.with_raw_response.create(
        model="rn-fail",
        input="hello",
        instructions="Be brief.",
        max_output_tokens=5,
        metadata={"ticket": "T-1"},
        extra_body={"unknown_future_field": {"keep": [1, 2.5]}, "provider": {"order": ["sim-a", "sim-b"]}},
        extra_headers={"OpenAI-Beta": BETA},
    )
    response = raw.parse()
    assert response.id == f"resp_{raw.headers['x-request-id']}"
    assert response.output_text == "tok0 tok1 tok2 tok3 tok4" and response.status == "incomplete"  # cut at 5
    assert response.to_dict()["store"] is True  # as the client asked; the upstream was told false
    assert (
        raw.headers["x-turnout-provider"] == "sim-b" and raw.headers["x-turnout-attempts"] == "3"
    )  # a retry, then the fallback
    assert response.usage is not None and response.usage.output_tokens == 5
    sent = json.loads(raw.http_request.content)
    failed = [(got, "rnf-a~503") for got in _received(gw, "rnf-a~503")]
    [served] = _received(gw, "rnf-b")
    for got, model in [*failed, (served, "rnf-b")]:
        expected = {k: v for k, v in sent.items() if k != "provider"}
        assert got["body"] == {**expected, "model": model, "store": False}
        assert list(got["body"])[: len(expected)] == list(expected)  # the client's order
        assert got["headers"] == {"openai-beta": BETA}
    assert client.responses.retrieve(response.id).output_text == response.output_text


def test_stream_fails_over_and_relays_the_upstream_events(gw: Gateway, client: openai.OpenAI) -> None:
    with client.responses.stream(model="rn-fail-s", input="hello") as stream:
        names = [event.type for event in stream]
        final = stream.get_final_response()
    assert names[:2] == ["response.created", "response.in_progress"]
    assert names.count("response.output_text.delta") == 12 and names[-1] == "response.completed"
    assert final.output_text == " ".join(f"tok{i}" for i in range(12))
    assert final.id.startswith("resp_") and str(final.output[0].to_dict()["id"]).startswith("msg_")  # upstream
    assert {e["status"] for e in gw.sim_log("rnfs-a~503")} == {503}
    [second] = _received(gw, "rnfs-b")
    assert second["body"]["stream"] is True and second["body"]["store"] is False
    kept = client.responses.retrieve(final.id)  # kept under Turnout's id before the last event
    assert kept.output_text == final.output_text


def test_a_built_in_web_search_reaches_the_upstream_natively(gw: Gateway, client: openai.OpenAI) -> None:
    raw = client.responses.with_raw_response.create(
        model="rn-search", input="what is new", tools=[{"type": "web_search"}], tool_choice="required"
    )
    response = raw.parse()
    assert [item.type for item in response.output] == ["web_search_call", "message"]
    assert "x-turnout-tools-left-out" not in raw.headers
    [got] = _received(gw, "rn-search")
    assert got["body"]["tools"] == [{"type": "web_search"}] and got["body"]["tool_choice"] == "required"


def test_a_forced_built_in_tool_skips_a_chat_offer_for_a_responses_one(gw: Gateway, client: openai.OpenAI) -> None:
    raw = client.responses.with_raw_response.create(
        model="rn-mixed", input="what is new", tools=[TOOL, {"type": "web_search"}], tool_choice="required"
    )
    assert raw.headers["x-turnout-provider"] == "sim-b" and raw.headers["x-turnout-attempts"] == "1"
    assert gw.sim_log("rnm-chat") == []  # skipped, never called


def test_a_built_in_tool_under_auto_is_left_out_only_for_a_chat_offer(gw: Gateway, client: openai.OpenAI) -> None:
    raw = client.responses.with_raw_response.create(
        model="rn-mixed", input="hi", tools=[{"type": "web_search"}], tool_choice="auto"
    )
    assert raw.headers["x-turnout-provider"] == "sim-a"  # the chat offer comes first and serves
    assert raw.headers["x-turnout-tools-left-out"] == "web_search"


def test_a_follow_up_is_sent_natively_with_the_first_turns_items(gw: Gateway, client: openai.OpenAI) -> None:
    first = client.responses.create(model="rn-conv", input="first question", tools=[TOOL])
    [call] = first.output
    assert call.type == "function_call"
    output: Any = [{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}]
    second = client.responses.create(model="rn-conv", input=output, previous_response_id=first.id, tools=[TOOL])
    assert second.previous_response_id == first.id and second.output_text.startswith("Tool result")
    _, got = _received(gw, "rn-conv")
    body = got["body"]
    assert "previous_response_id" not in body and body["store"] is False
    replayed = {k: v for k, v in call.to_dict().items() if k != "id"}
    assert body["input"] == [{"role": "user", "content": "first question"}, replayed, *output]
    # the stored conversation serves a chat-api model too: the call and its output as chat messages
    third = client.responses.create(model="rn-chat", input="and tomorrow?", previous_response_id=second.id)
    assert third.status == "completed" and third.previous_response_id == second.id


def test_a_chat_request_to_a_responses_only_model_is_a_400_naming_why(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="rn-ok", messages=[{"role": "user", "content": "hi"}])
    body: Any = caught.value.body
    assert body["code"] == "unsupported_by_providers"
    assert "api: responses" in body["message"] and "/v1/responses" in body["message"]


def test_a_forced_built_in_tool_on_a_chat_only_model_is_still_a_400_naming_it(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model="rn-chat", input="x", tools=[TOOL, {"type": "web_search"}], tool_choice="required"
        )
    body: Any = caught.value.body
    assert body["code"] == "unsupported_tool" and body["param"] == "tools[1].type"


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_a_failed_response_before_any_content_fails_over(gw: Gateway, client: openai.OpenAI, stream: bool) -> None:
    final: openai.types.responses.Response
    if stream:
        with client.responses.stream(model="rn-failed", input="hello") as events:
            final = events.get_final_response()
    else:
        final = client.responses.create(model="rn-failed", input="hello")
    assert final.status == "completed" and final.output_text.startswith("tok0")  # sim-b's: sim-a always fails
    failed = gw.sim_log("rnx-a~bodyerr")
    assert failed and failed[-1]["stream"] is stream and failed[-1]["status"] == 200  # a 200 that failed


@pytest.mark.parametrize(("model", "deltas"), [("rn-cut", 3), ("rn-nodone", 12)], ids=["cut", "no-completed"])
def test_a_native_stream_broken_after_content_ends_with_a_numbered_error_event(
    client: openai.OpenAI, model: str, deltas: int
) -> None:
    with client.responses.with_streaming_response.create(model=model, input="hello", stream=True) as response:
        events = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]
    assert events[0]["type"] == "response.created" and events[0]["response"]["id"].startswith("resp_")
    assert [e["type"] for e in events].count("response.output_text.delta") == deltas
    last = events[-1]
    assert last["type"] == "error" and last["code"] in ("upstream_error", "stream_interrupted")
    assert last["sequence_number"] == events[-2]["sequence_number"] + 1


def test_idempotency_key_replays_the_native_response(gw: Gateway) -> None:
    body = {"model": "rn-idem", "input": "once"}
    headers = {"authorization": f"Bearer {KEY}", "idempotency-key": "resp-native-idem-1"}
    with httpx.Client(timeout=30) as http:
        first = http.post(f"{gw.base_url}/v1/responses", json=body, headers=headers)
        again = http.post(f"{gw.base_url}/v1/responses", json=body, headers=headers)
    assert first.status_code == again.status_code == 200
    assert again.headers["x-turnout-idempotent-replay"] == "1" and again.json() == first.json()
    assert first.json()["id"] == f"resp_{first.headers['x-request-id']}"
    assert len(gw.sim_log("rn-idem")) == 1  # the replay called no upstream
