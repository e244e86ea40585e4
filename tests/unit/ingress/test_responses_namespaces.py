"""Codex's Responses requests: `namespace` tools become chat functions and their calls come back
namespaced; a built-in tool offered without forcing a tool is left out, not refused."""

from __future__ import annotations

from typing import Any

from turnout_ingress.surfaces.responses.answer import output_messages, to_response
from turnout_ingress.surfaces.responses.events import EventSequencer
from turnout_ingress.surfaces.responses.request import translate_request
from turnout_ingress.surfaces.responses.tools import split_call_name

CLOSE = {"type": "function", "name": "close_agent", "parameters": {"type": "object", "properties": {}}}
NAMESPACE = {"type": "namespace", "name": "multi_agent_v1", "description": "agents", "tools": [CLOSE]}
CODEX_TOOLS: list[Any] = [
    {"type": "function", "name": "view_image", "parameters": {"type": "object", "properties": {}}},
    NAMESPACE,
    {"type": "web_search", "external_web_access": False},
]


def _call(name: str) -> dict[str, Any]:
    return {"id": "call_1", "type": "function", "function": {"name": name, "arguments": "{}"}}


def test_a_codex_request_keeps_its_functions_flattens_its_namespace_and_leaves_web_search_out() -> None:
    call = translate_request({"model": "m", "input": "hi", "tools": CODEX_TOOLS, "tool_choice": "auto"})
    assert [t["function"]["name"] for t in call.chat["tools"]] == ["view_image", "multi_agent_v1__close_agent"]
    assert call.chat["tool_choice"] == "auto"
    assert call.tools_left_out == ("web_search",)
    assert call.echo["tools"] == CODEX_TOOLS  # the Response echoes what was sent


def test_only_built_in_tools_leave_no_tools_and_a_required_choice_is_refused_elsewhere() -> None:
    call = translate_request({"model": "m", "input": "hi", "tools": [{"type": "web_search"}]})
    assert "tools" not in call.chat and call.tools_left_out == ("web_search",)


def test_a_namespaced_call_is_parted_again_in_the_answer_and_the_stream() -> None:
    completion = {
        "model": "m",
        "choices": [
            {
                "message": {"role": "assistant", "content": None, "tool_calls": [_call("multi_agent_v1__close_agent")]},
                "finish_reason": "tool_calls",
            }
        ],
    }
    echo = {"tools": CODEX_TOOLS}
    response = to_response(completion, request_id="r1", created_at=0, echo=echo, model="m")
    item = response["output"][0]
    assert (item["name"], item["namespace"]) == ("close_agent", "multi_agent_v1")
    assert output_messages(response["output"])[0]["tool_calls"][0]["function"]["name"] == "multi_agent_v1__close_agent"
    sequencer = EventSequencer(request_id="r1", created_at=0, model="m", echo=echo)
    events = sequencer.feed(
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, **_call("multi_agent_v1__close_agent")}]}}]}
    )
    added = next(e for e in events if e["type"] == "response.output_item.added")["item"]
    assert (added["name"], added["namespace"]) == ("close_agent", "multi_agent_v1")


def test_a_follow_up_naming_a_namespaced_call_reaches_chat_with_the_joined_name() -> None:
    items = [
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "close_agent",
            "namespace": "multi_agent_v1",
            "arguments": "{}",
        },
        {"type": "function_call_output", "call_id": "c1", "output": "closed"},
    ]
    call = translate_request({"model": "m", "input": items, "tools": CODEX_TOOLS})
    assert call.chat["messages"][0]["tool_calls"][0]["function"]["name"] == "multi_agent_v1__close_agent"
    assert call.input_items[0]["namespace"] == "multi_agent_v1"


def test_split_call_name_parts_only_the_request_s_own_namespaces() -> None:
    assert split_call_name("multi_agent_v1__close_agent", CODEX_TOOLS) == ("close_agent", "multi_agent_v1")
    assert split_call_name("multi_agent_v1__other", CODEX_TOOLS) == ("multi_agent_v1__other", None)
    assert split_call_name("get__x", CODEX_TOOLS) == ("get__x", None)
    assert split_call_name("view_image", None) == ("view_image", None)


def test_a_namespace_s_tools_of_no_chat_form_are_named_as_left_out() -> None:
    space = {"type": "namespace", "name": "ns", "tools": [{"type": "web_search"}, {"type": "function", "name": "f"}]}
    call = translate_request({"model": "m", "input": "hi", "tools": [space]})
    assert [t["function"]["name"] for t in call.chat["tools"]] == ["ns__f"]
    assert call.tools_left_out == ("web_search",)


def test_a_stream_cut_after_its_text_began_leaves_that_message_incomplete() -> None:
    sequencer = EventSequencer(request_id="r1", created_at=0, model="m", echo={"tools": []})
    sequencer.feed({"choices": [{"index": 0, "delta": {"content": "Hel"}}]})
    failed = sequencer.failed("cut", None)[-1]
    assert failed["type"] == "response.failed"
    assert [item["status"] for item in failed["response"]["output"]] == ["incomplete"]
