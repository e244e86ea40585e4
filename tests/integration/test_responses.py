"""The Responses surface through the whole fleet with the official `openai` SDK: `responses.create`
(queued through a worker) and `responses.stream` (the direct path), failover, the conversation
store by `previous_response_id` across a dead provider, and the stored Responses' routes."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest

from support.gateway import Gateway, start_gateway
from support.procs import Fleet, require_redis
from support.recording_upstream import RecordingUpstream

pytestmark = pytest.mark.integration

KEY = "tk-test-responses-000001"
OTHER = "tk-test-responses-other1"
STRANGER = "tk-test-responses-globex"

CONFIG = """\
providers:
  sim-a:  {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
  sim-b:  {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-b}}
  claude: {{kind: anthropic, base_url: "{sim}", api_key: key-claude}}
  rec:    {{kind: openai_compatible, base_url: "{rec}/v1", api_key: key-rec}}
models:
  r-ok:     {{offers: [{{provider: sim-a, model: r-ok}}]}}
  r-s:      {{offers: [{{provider: sim-a, model: r-s}}]}}
  r-long:   {{offers: [{{provider: sim-a, model: "rlong~len20"}}]}}
  r-claude: {{offers: [{{provider: claude, model: r-claude}}]}}
  r-rec:    {{offers: [{{provider: rec, model: r-rec}}]}}
  r-fail:
    order: priority
    offers: [{{provider: sim-a, model: "rfail-a~503"}}, {{provider: sim-b, model: rfail-b}}]
  r-conv:
    order: priority
    offers: [{{provider: sim-a, model: "rconv-a~200,503"}}, {{provider: rec, model: rconv-rec}}]
  r-cut:    {{offers: [{{provider: sim-a, model: "rcut~cut3"}}]}}
  r-idem:   {{offers: [{{provider: sim-a, model: r-idem}}]}}
policy:
  retry: {{base_ms: 250, max_ms: 500}}
orgs:
  acme:
    keys:
      - {{name: main, key: {key}}}
      - {{name: other, key: {other}}}
  globex:
    keys:
      - {{name: main, key: {stranger}}}
"""

WEATHER: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "strict": True,
}


@pytest.fixture(scope="module")
def rec() -> Iterator[RecordingUpstream]:
    upstream = RecordingUpstream()
    yield upstream
    upstream.stop()


@pytest.fixture(scope="module")
def gw(rec: RecordingUpstream) -> Iterator[Gateway]:
    """Redis + simulator + the recording upstream + ingress + one worker."""
    require_redis()
    fleet = Fleet()
    try:
        gateway = start_gateway(fleet, CONFIG, key=KEY, other=OTHER, stranger=STRANGER, rec=rec.url)
        yield gateway
        gateway.close()
    finally:
        fleet.stop_all()


@pytest.fixture(scope="module")
def client(gw: Gateway) -> openai.OpenAI:
    return gw.client(KEY)


def test_create_with_a_string_input_answers_a_response_object(gw: Gateway, client: openai.OpenAI) -> None:
    raw = client.responses.with_raw_response.create(model="r-ok", input="hello", max_output_tokens=5)
    response = raw.parse()
    assert response.object == "response" and response.status == "completed"
    assert response.id == f"resp_{raw.headers['x-request-id']}"
    assert response.output_text == "tok0 tok1 tok2 tok3 tok4"
    [item] = response.output
    assert item.type == "message" and item.id.startswith("msg_") and item.status == "completed"
    assert response.usage is not None and response.usage.output_tokens == 5
    assert response.usage.total_tokens == response.usage.input_tokens + 5
    assert response.max_output_tokens == 5 and response.to_dict()["store"] is True and response.error is None
    assert raw.headers["x-turnout-provider"] == "sim-a" and raw.headers["x-turnout-attempts"] == "1"
    [entry] = gw.sim_log("r-ok")
    assert entry["status"] == 200


def test_items_and_instructions_reach_the_upstream_as_chat_messages(
    rec: RecordingUpstream, client: openai.OpenAI
) -> None:
    items: Any = [
        {"role": "user", "content": "first"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "second"}]},
    ]
    response = client.responses.create(
        model="r-rec",
        instructions="Be brief.",
        input=items,
        temperature=0.5,
        metadata={"ticket": "T-1"},
        reasoning={"effort": "low"},
    )
    assert response.output_text == "seen 4 messages" and response.metadata == {"ticket": "T-1"}
    sent = rec.received("r-rec")[-1]
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "second"}]},
    ]
    assert sent["temperature"] == 0.5 and sent["reasoning_effort"] == "low"
    assert "metadata" not in sent and "store" not in sent and "instructions" not in sent


def test_json_schema_format_reaches_the_upstream_as_response_format(
    rec: RecordingUpstream, client: openai.OpenAI
) -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    response = client.responses.create(
        model="r-rec",
        input="count",
        text={"format": {"type": "json_schema", "name": "count", "schema": schema, "strict": True}},
        max_output_tokens=50,
    )
    assert response.text is not None and response.text.format is not None and response.text.format.type == "json_schema"
    sent = rec.received("r-rec")[-1]
    assert sent["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "count", "schema": schema, "strict": True},
    }
    assert sent["max_completion_tokens"] == 50


def test_function_tool_round_trip_with_function_call_output(client: openai.OpenAI) -> None:
    first = client.responses.create(model="r-ok", input="weather in Paris?", tools=[WEATHER], store=False)
    [call] = [item for item in first.output if item.type == "function_call"]
    assert call.name == "get_weather" and (call.id or "").startswith("fc_") and call.status == "completed"
    assert "city" in json.loads(call.arguments)
    second = client.responses.create(
        model="r-ok",
        tools=[WEATHER],
        input=[
            {"role": "user", "content": "weather in Paris?"},
            {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
            {"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21 C"},
        ],
    )
    assert second.output_text.startswith("Tool result:") and "sunny" in second.output_text


def test_an_anthropic_target_serves_a_response(client: openai.OpenAI) -> None:
    response = client.responses.create(model="r-claude", input="hello", max_output_tokens=4)
    assert response.output_text == "tok0 tok1 tok2 tok3" and response.status == "completed"


def test_a_cut_answer_is_incomplete_for_max_output_tokens(client: openai.OpenAI) -> None:
    response = client.responses.create(model="r-long", input="hello", max_output_tokens=3)
    assert response.status == "incomplete"
    assert response.incomplete_details is not None and response.incomplete_details.reason == "max_output_tokens"


def test_stream_of_text_ends_with_the_whole_response(client: openai.OpenAI) -> None:
    with client.responses.stream(model="r-s", input="hello", max_output_tokens=4) as stream:
        events = list(stream)
        final = stream.get_final_response()
    numbers = [e.sequence_number for e in events]
    assert numbers == list(range(len(events)))
    kinds = [e.type for e in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "tok0 tok1 tok2 tok3"
    assert final.output_text == "tok0 tok1 tok2 tok3" and final.usage is not None and final.usage.output_tokens == 4


def test_stream_of_a_function_call(client: openai.OpenAI) -> None:
    with client.responses.stream(model="r-s", input="weather?", tools=[WEATHER], tool_choice="required") as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    assert "response.function_call_arguments.delta" in kinds and "response.function_call_arguments.done" in kinds
    [call] = [item for item in final.output if item.type == "function_call"]
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert done.arguments == call.arguments and "city" in json.loads(call.arguments)


def test_create_stream_true_yields_events_and_headers(client: openai.OpenAI) -> None:
    with client.responses.with_streaming_response.create(model="r-s", input="hi", stream=True) as raw:
        assert raw.headers["x-turnout-provider"] == "sim-a"
        events = list(raw.parse())
    assert events[-1].type == "response.completed"


def test_a_broken_stream_ends_with_response_failed(client: openai.OpenAI) -> None:
    events = list(client.responses.create(model="r-cut", input="hi", stream=True))
    assert events[-1].type == "response.failed"
    assert events[-1].response.error is not None and events[-1].response.status == "failed"


@pytest.mark.parametrize("stream", [False, True], ids=["queued", "streamed"])
def test_failover_first_offer_503_second_serves(gw: Gateway, stream: bool) -> None:
    body = {"model": "r-fail", "input": "hello", "stream": stream}
    with httpx.Client(timeout=30) as http:
        answer = http.post(f"{gw.base_url}/v1/responses", json=body, headers={"authorization": f"Bearer {KEY}"})
    assert answer.status_code == 200
    assert answer.headers["x-turnout-provider"] == "sim-b" and answer.headers["x-turnout-fallback"] == "1"
    assert int(answer.headers["x-turnout-attempts"]) >= 2


def test_conversation_continues_on_another_provider_after_the_first_died(
    gw: Gateway, rec: RecordingUpstream, client: openai.OpenAI
) -> None:
    first = client.with_options(max_retries=0).responses.with_raw_response.create(model="r-conv", input="turn one")
    assert first.headers["x-turnout-provider"] == "sim-a"
    second = client.responses.with_raw_response.create(
        model="r-conv", input="turn two", previous_response_id=first.parse().id
    )
    assert second.headers["x-turnout-provider"] == "rec"
    with client.responses.stream(model="r-conv", input="turn three", previous_response_id=second.parse().id) as stream:
        third = stream.get_final_response()
    assert third.previous_response_id == second.parse().id and third.output_text == "seen 5 messages"
    sent = rec.received("rconv-rec")[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert sent[0]["content"] == "turn one" and sent[1]["content"] == first.parse().output_text
    assert sent[2]["content"] == "turn two" and sent[3]["content"] == "seen 3 messages"
    assert sent[4]["content"] == "turn three"


def test_stored_response_get_input_items_delete_and_scoping(gw: Gateway, client: openai.OpenAI) -> None:
    made = client.responses.create(
        model="r-ok", input=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], max_output_tokens=2
    )
    assert client.responses.retrieve(made.id).output_text == made.output_text
    page = client.responses.input_items.list(made.id, order="asc", limit=1)
    assert [item.content[0].text for item in page.data] == ["a"] and page.has_more  # type: ignore[union-attr,index]
    for key in (OTHER, STRANGER):
        other = gw.client(key)
        calls: list[Callable[[], object]] = [
            lambda: other.responses.retrieve(made.id),
            lambda: other.responses.input_items.list(made.id),
            lambda: other.responses.delete(made.id),
            lambda: other.responses.create(model="r-ok", input="x", previous_response_id=made.id),
        ]
        for call in calls:
            with pytest.raises(openai.NotFoundError):
                call()
    with httpx.Client(timeout=10) as http:
        gone = http.delete(f"{gw.base_url}/v1/responses/{made.id}", headers={"authorization": f"Bearer {KEY}"})
    assert gone.json() == {"id": made.id, "object": "response", "deleted": True}
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="r-ok", input="x", previous_response_id=made.id)
    assert caught.value.body["code"] == "previous_response_not_found"  # type: ignore[index]
    assert caught.value.body["param"] == "previous_response_id"  # type: ignore[index]


def test_store_false_keeps_nothing(client: openai.OpenAI) -> None:
    made = client.responses.create(model="r-ok", input="x", store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(made.id)


def test_a_built_in_tool_that_may_be_forced_is_a_400_naming_it(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model="r-ok", input="x", tools=[WEATHER, {"type": "web_search"}], tool_choice="required"
        )
    assert caught.value.body["param"] == "tools[1].type"  # type: ignore[index]
    assert caught.value.body["code"] == "unsupported_tool"  # type: ignore[index]


def test_a_built_in_tool_offered_with_tool_choice_auto_is_left_out_and_named(client: openai.OpenAI) -> None:
    tools: Any = [WEATHER, {"type": "web_search"}, {"type": "file_search"}]  # as a client sends them
    raw = client.responses.with_raw_response.create(model="r-ok", input="x", tools=tools)
    assert raw.headers["x-turnout-tools-left-out"] == "web_search,file_search"
    answer = raw.parse()
    assert answer.status == "completed" and [t.type for t in answer.tools] == ["function", "web_search", "file_search"]


def test_idempotency_key_replays_the_same_response(gw: Gateway) -> None:
    body = {"model": "r-idem", "input": "once", "store": False}
    headers = {"authorization": f"Bearer {KEY}", "idempotency-key": "resp-idem-1"}
    with httpx.Client(timeout=30) as http:
        first = http.post(f"{gw.base_url}/v1/responses", json=body, headers=headers)
        again = http.post(f"{gw.base_url}/v1/responses", json=body, headers=headers)
    assert first.status_code == again.status_code == 200
    assert again.headers["x-turnout-idempotent-replay"] == "1" and again.json()["id"] == first.json()["id"]
    assert again.json()["output"] == first.json()["output"]
    assert len(gw.sim_log("r-idem")) == 1  # the replay called no upstream


def test_provider_preferences_steer_the_plan(client: openai.OpenAI) -> None:
    raw = client.responses.with_raw_response.create(
        model="r-fail", input="hi", extra_body={"provider": {"only": ["sim-b"]}}
    )
    assert raw.headers["x-turnout-provider"] == "sim-b" and raw.headers["x-turnout-attempts"] == "1"


def test_a_function_calls_arguments_not_json_to_an_anthropic_target_is_a_400_naming_the_clients_field(
    client: openai.OpenAI,
) -> None:
    items: Any = [
        {"role": "user", "content": "weather?"},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": "{not json"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "c2", "output": "rainy"},
    ]
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as caught:
            if stream:
                with client.responses.stream(model="r-claude", instructions="Be brief.", input=items, tools=[WEATHER]):
                    pass
            else:
                client.responses.create(model="r-claude", instructions="Be brief.", input=items, tools=[WEATHER])
        error: Any = caught.value.body
        assert error["param"] == "input[2].arguments", error
        assert "`input[2].arguments` is not valid JSON" in error["message"], error


def test_a_system_only_input_to_an_anthropic_target_is_a_400_naming_input_before_any_call(
    gw: Gateway, client: openai.OpenAI
) -> None:
    """Anthropic needs a user turn: the translation refuses (no upstream call) and names the client's field."""
    calls_before = len(gw.sim_log("r-claude"))
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="r-claude", instructions="Be brief.", input=[{"role": "system", "content": "x"}])
    error: Any = caught.value.body
    assert (error["param"], error["code"], error["attempts"]) == ("input", "unsupported_by_providers", []), error
    assert "`input` holds no user or assistant message" in error["message"], error
    with pytest.raises(openai.BadRequestError) as on_chat:  # the chat surface names its own field
        client.chat.completions.create(model="r-claude", messages=[{"role": "system", "content": "x"}])
    chat_error: Any = on_chat.value.body
    assert chat_error["param"] == "messages", chat_error
    assert len(gw.sim_log("r-claude")) == calls_before


def test_a_chat_clients_openai_beta_header_reaches_an_openai_family_upstream(
    client: openai.OpenAI, rec: RecordingUpstream
) -> None:
    """Same family, same headers: as `anthropic-beta` on the Messages surface (queued and streamed)."""
    beta = {"OpenAI-Beta": "assistants=v2"}
    client.chat.completions.create(model="r-rec", messages=[{"role": "user", "content": "b"}], extra_headers=beta)
    for _ in client.chat.completions.create(
        model="r-rec", messages=[{"role": "user", "content": "b"}], stream=True, extra_headers=beta
    ):
        pass
    client.chat.completions.create(model="r-rec", messages=[{"role": "user", "content": "b"}])
    assert rec.beta_headers("r-rec")[-3:] == ["assistants=v2", "assistants=v2", None]
