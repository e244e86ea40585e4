"""An error about the canonical chat request told in the Responses request's words
(`turnout_ingress.surfaces.responses.params`): `messages[3].tool_calls[1].function.arguments` is `input[2].arguments`."""

from __future__ import annotations

from typing import Any

import pytest

from turnout_ingress.surfaces.responses.params import MessageSource, client_error, client_path
from turnout_ingress.surfaces.responses.request import translate_input, translate_request

ITEMS: Any = [
    {"role": "user", "content": "weather?"},
    {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
    {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": "{not json"},
    {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    {"role": "assistant", "content": "Let me look."},
    {"type": "function_call", "call_id": "c3", "name": "get_weather", "arguments": "{}"},
]


def test_each_message_knows_the_items_it_came_from() -> None:
    messages, _, sources = translate_input(ITEMS)
    assert len(messages) == len(sources) == 4
    assert sources == (MessageSource(0), MessageSource(1, (1, 2)), MessageSource(3), MessageSource(4, (5,)))
    assert translate_input("hi")[2] == (MessageSource(0),)


@pytest.mark.parametrize(
    ("path", "client"),
    [
        ("messages", "input"),
        ("messages[0]", "instructions"),
        ("messages[1]", "previous_response_id"),
        ("messages[2].content", "input[0].content"),
        ("messages[2].content[1]", "input[0].content[1]"),
        ("messages[3].tool_calls[1].function.arguments", "input[2].arguments"),
        ("messages[3].tool_calls[1]", "input[2]"),
        ("messages[3].tool_calls[7]", "input[1]"),
        ("messages[5].tool_calls[0].function.arguments", "input[5].arguments"),
        ("messages[9]", None),
        ("input[0]", None),
    ],
)
def test_a_canonical_path_is_the_clients_field(path: str, client: str | None) -> None:
    sources = translate_input(ITEMS)[2]
    assert client_path(path, instructions=True, history=1, sources=sources) == client
    assert client_path("messages[0]", instructions=False, history=0, sources=sources) == "input[0]"


def test_an_error_names_the_clients_field_in_its_param_and_message() -> None:
    call = translate_request({"model": "m", "instructions": "Be brief.", "input": ITEMS})
    error = {
        "message": "No provider of `m` can take this request as sent (none was called): claude: "
        "`messages[2].tool_calls[1].function.arguments` is not valid JSON.",
        "type": "invalid_request_error",
        "param": "messages[2].tool_calls[1].function.arguments",
        "code": "unsupported_by_providers",
    }
    told = client_error(error, instructions=True, history=0, sources=call.sources)
    assert told["param"] == "input[2].arguments"
    assert told["message"].endswith("claude: `input[2].arguments` is not valid JSON.")
    assert told["code"] == "unsupported_by_providers"


def test_a_param_names_the_longest_path_its_message_gives_under_it() -> None:
    error = {"message": "`messages[1].tool_calls[1].function.arguments` is bad", "param": "messages[1].tool_calls[1]"}
    told = client_error(error, instructions=False, history=0, sources=translate_input(ITEMS)[2])
    assert told["param"] == "input[2].arguments"


@pytest.mark.parametrize("param", [None, "model", "input[0]", "tool_choice"])
def test_an_error_not_about_the_canonical_messages_is_left_as_it_is(param: str | None) -> None:
    error = {"message": "`messages` whatever", "param": param}
    assert client_error(error, instructions=False, history=0, sources=()) is error
