"""The Responses surface's native carry: what an `api: responses` offer receives (only `model`,
`provider`, `previous_response_id` and `store` changed, the stored turns replayed in `input`),
what the client gets back (Turnout's Response id), and a native stream relayed as sent."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnout.core.native import RESPONSES, native_body
from turnout.errors import RequestRejected
from turnout_ingress.surfaces.responses.native import (
    carried,
    client_response,
    items_of_messages,
    native_stream,
    replayable,
    upstream_body,
)
from turnout_ingress.surfaces.responses.request import translate_request

BODY: Any = {
    "model": "deep",
    "input": [{"role": "user", "content": "second"}],
    "instructions": "Be brief.",
    "previous_response_id": "resp_first",
    "tools": [{"type": "web_search"}],
    "provider": {"sort": "price"},
    "store": True,
    "unknown_future_field": {"keep": [1, 2.5, "three"]},
}
HISTORY: Any = [{"role": "user", "content": "first"}, {"type": "message", "role": "assistant", "content": []}]


def _sent(body: Any, history: Any, model: str = "up-model") -> Any:
    """What the offer receives: the surface's rewrite, then the router's (`native_body`)."""
    return json.loads(native_body(upstream_body(json.dumps(body).encode(), history), model))


def test_only_model_provider_previous_response_id_input_and_store_change() -> None:
    sent = _sent(BODY, HISTORY)
    unchanged = {k: v for k, v in BODY.items() if k not in ("model", "provider", "previous_response_id", "store")}
    assert sent == {**unchanged, "model": "up-model", "input": HISTORY + BODY["input"], "store": False}
    assert [k for k in sent if k in BODY] == [k for k in BODY if k in sent]  # the client's order


def test_a_string_input_follows_the_history_as_a_user_message() -> None:
    sent = _sent({**BODY, "input": "second"}, HISTORY)
    assert sent["input"] == [*HISTORY, {"role": "user", "content": "second"}]


def test_without_a_conversation_input_is_sent_as_is_and_store_is_false() -> None:
    body = {"model": "deep", "input": "hi", "stream": True}
    assert _sent(body, None) == {"model": "up-model", "input": "hi", "stream": True, "store": False}


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=8).filter(lambda k: k not in ("model", "provider", "store", "input")),
        st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5)),
        max_size=6,
    )
)
def test_any_other_field_passes_unchanged(extra: dict[str, Any]) -> None:
    body = {"model": "deep", "input": "hi", **extra}
    sent = _sent(body, None)
    expected = {k: v for k, v in body.items() if k != "previous_response_id"}
    assert sent == {**expected, "model": "up-model", "store": False}


@pytest.mark.parametrize("raw", [b"[]", b"not json"])
def test_a_body_that_is_no_object_is_refused(raw: bytes) -> None:
    with pytest.raises((ValueError, TypeError)):
        upstream_body(raw, None)


def test_replayed_output_items_lose_only_the_ids_an_unstored_upstream_cannot_know() -> None:
    output = [
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"type": "message", "id": "msg_1", "role": "assistant", "content": []},
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
    ]
    assert replayable(output) == [
        output[0],
        {"type": "message", "role": "assistant", "content": []},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        output[3],
    ]


def test_the_clients_response_has_turnouts_id_and_the_clients_store() -> None:
    upstream = {"id": "resp_up", "object": "response", "store": False, "previous_response_id": None, "model": "m"}
    echo = {"store": True, "previous_response_id": "resp_first"}
    assert client_response(upstream, request_id="rid9", echo=echo) == {
        "id": "resp_rid9",
        "object": "response",
        "store": True,
        "previous_response_id": "resp_first",
        "model": "m",
    }


def test_the_carry_holds_the_body_and_openai_beta_and_names_a_forced_built_in_tool() -> None:
    data = {"model": "deep", "input": "x", "tools": [{"type": "web_search"}], "tool_choice": "required"}
    raw = json.dumps(data).encode()
    call = translate_request(dict(data), defer_builtin=True)
    native = carried(raw, [("OpenAI-Beta", "b"), ("authorization", "Bearer k")], call)
    assert native.surface == RESPONSES and native.body == raw and native.headers == (("openai-beta", "b"),)
    assert native.crossing is not None and native.crossing[1] == "tools[0].type"
    assert "tool_choice" not in call.chat and "tools" not in call.chat  # the chat form has none of it
    with pytest.raises(RequestRejected) as info:
        translate_request(dict(data))
    assert info.value.code == "unsupported_tool"
    plain = translate_request({"model": "deep", "input": "x"}, defer_builtin=True)
    assert carried(b"{}", [], plain).crossing is None
    with pytest.raises(RequestRejected):
        carried(b"{}", [("openai-beta", "bad\x01")], plain)


def test_a_tool_choice_naming_a_built_in_tool_is_deferred_too() -> None:
    data = {"model": "deep", "input": "x", "tool_choice": {"type": "file_search"}}
    call = translate_request(data, defer_builtin=True)
    assert call.builtin_refusal is not None and call.builtin_refusal.param == "tool_choice.type"


def _event(data: dict[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


async def _frames(writes: list[bytes]) -> AsyncIterator[bytes]:
    for write in writes:
        yield write


async def test_a_native_stream_is_relayed_as_sent_but_for_its_responses_fields() -> None:
    start = {"id": "resp_up", "status": "in_progress", "store": False, "previous_response_id": None}
    created = {"type": "response.created", "sequence_number": 0, "response": start}
    delta = b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta", "sequence_number":1,"delta":"hi"}\n\n'
    done = {"type": "response.completed", "sequence_number": 2, "response": {**start, "status": "completed"}}
    kept: list[dict[str, Any]] = []

    async def keeper(response: dict[str, Any]) -> None:
        kept.append(response)

    echo = {"store": True, "previous_response_id": "resp_first"}
    writes = [_event(created) + delta[:20], delta[20:], _event(done)]
    out = [w async for w in native_stream(_frames(writes), request_id="rid", echo=echo, keeper=keeper)]
    assert out[1] == delta  # an event with no Response passes byte for byte
    first = json.loads(out[0].decode().split("data: ")[1])
    fixed = {"id": "resp_rid", "store": True, "previous_response_id": "resp_first"}
    assert first == {**created, "response": {**start, **fixed}}
    assert kept == [{**start, "status": "completed", **fixed}]


async def test_the_relays_error_event_is_numbered_after_the_providers_last() -> None:
    delta = {"type": "response.output_text.delta", "sequence_number": 4, "delta": "x"}
    error = b'event: error\ndata: {"type":"error","code":"upstream_error","message":"m","param":null}\n\n'
    out = [w async for w in native_stream(_frames([_event(delta), error]), request_id="r", echo={}, keeper=None)]
    assert json.loads(out[-1].decode().split("data: ")[1])["sequence_number"] == 5


def test_a_conversation_stored_before_items_were_kept_is_replayed_from_its_messages() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"x"}'}}
    messages: Any = [
        {"role": "user", "content": "first"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "u"}}],
        },
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {
            "role": "tool",
            "tool_call_id": "c2",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "It is sunny."}]},
    ]
    assert items_of_messages(messages) == [
        {"role": "user", "content": "first"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": "u", "detail": "auto"},
            ],
        },
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city":"x"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "c2", "output": "ab"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "It is sunny."}]},
    ]
