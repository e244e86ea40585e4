"""`turnout_ingress.json_reason`: a lone surrogate escape is named as such, not as "truncated"."""

from __future__ import annotations

import msgspec
import pytest

from turnout.adapters.anthropic_wire import WireError
from turnout.errors import RequestRejected
from turnout.json_reason import LONE_SURROGATE, json_reason
from turnout_ingress.messages_wire import parse_messages_request
from turnout_ingress.validation import parse_chat_request


def _reason(raw: bytes) -> str:
    with pytest.raises(msgspec.DecodeError) as info:
        msgspec.json.decode(raw)
    return json_reason(raw, info.value)


@pytest.mark.parametrize(
    "raw",
    [rb'{"a":"\ud800"}', rb'{"a":"\uDBFFx"}', rb'{"a":"\\\ud800"}', rb'{"a":"ok","b":"\ud9ab "}'],
    ids=["before-quote", "before-letter", "after-an-escaped-backslash", "second-field"],
)
def test_a_high_surrogate_escape_alone_is_named(raw: bytes) -> None:
    assert _reason(raw) == LONE_SURROGATE


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (rb'{"a":', "Input data was truncated"),
        (rb'{"a":"\ud800', "Input data was truncated"),  # cut inside the escape's string: truncated it is
        (rb'{"a":"\\ud800x"', "Input data was truncated"),  # `\\` is a backslash: no escape, cut at the end
        (rb'{"a":"\udc00"}', "JSON is malformed: invalid utf-16 surrogate pair (byte 12)"),
        (rb'{"a":NaN}', "JSON is malformed: invalid character (byte 5)"),
    ],
)
def test_every_other_reason_is_msgspecs_own(raw: bytes, reason: str) -> None:
    assert _reason(raw) == reason


def test_both_routes_quote_it_in_their_400() -> None:
    body = b'{"model":"m","messages":[{"role":"user","content":"\\ud800"}]}'
    with pytest.raises(RequestRejected) as chat:
        parse_chat_request(body)
    assert chat.value.status_code == 400 and LONE_SURROGATE in str(chat.value.message)
    with pytest.raises(WireError) as messages:
        parse_messages_request(b'{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"\\ud800"}]}')
    assert LONE_SURROGATE in messages.value.message
