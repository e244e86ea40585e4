"""`turnout.json_reason`: a lone surrogate escape is named as such, not as "truncated"; a number out of range names its field."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnout.adapters.chat_parts import WireError
from turnout.errors import RequestRejected
from turnout.json_reason import LONE_SURROGATE, OutOfRange, json_reason, out_of_range
from turnout_ingress.serving.validation import parse_chat_request
from turnout_ingress.surfaces.messages.wire import parse_messages_request


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


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"model":"m","temperature":1e400}', "Number out of range - at `temperature` (1e400)"),
        (b'{"a":[1,2,{"x":-1e400}]}', "Number out of range - at `a[2].x` (-1e400)"),
        (
            b'{"a":1,"b":[1e-400, 2e308]}',
            "Number out of range - at `b[1]` (2e308)",
        ),  # underflow is 0.0, not out of range
        (b"[1, 1e999]", "Number out of range - at `[1]` (1e999)"),
        (b'{"a.b":{"` x":1E+999}}', 'Number out of range - at `["a.b"]["` x"]` (1E+999)'),
        (
            b'{"n":' + b"7" * 5000 + b"}",
            "Integer value out of range - at `n` (777777777777777777777777…, 5000 characters)",
        ),
    ],
    ids=["top-level-field", "nested", "second-of-two", "array", "odd-keys", "too-many-digits"],
)
def test_a_number_out_of_range_names_its_field(raw: bytes, reason: str) -> None:
    assert _reason(raw) == reason


def test_a_number_out_of_range_with_no_field_keeps_msgspecs_words() -> None:
    assert _reason(b"1e999") == "Number out of range"


def test_the_chat_route_names_the_field_in_its_400() -> None:
    body = b'{"model":"m","messages":[{"role":"user","content":"hi"}],"top_p":1e400}'
    with pytest.raises(RequestRejected) as chat:
        parse_chat_request(body)
    assert (chat.value.status_code, chat.value.param) == (400, "top_p")
    assert (
        chat.value.message == "The request body holds a number out of range: Number out of range - at `top_p` (1e400)"
    )
    with pytest.raises(RequestRejected) as broken:
        parse_chat_request(b'{"model":"m",')
    assert broken.value.message.startswith("The request body is not valid JSON: ")


_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.text(max_size=5))
_KEY = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True)


@st.composite
def _document_with_a_huge_number(draw: st.DrawFn) -> tuple[bytes, str]:
    """A JSON document with `1e400` at one place, and that place's path as the reason names it."""
    doc: Any = "__HUGE__"
    path: list[str | int] = []
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.booleans()):
            others = draw(st.lists(_LEAF, max_size=3))
            at = draw(st.integers(0, len(others)))
            doc = [*others[:at], doc, *others[at:]]
            path.insert(0, at)
        else:
            key = draw(_KEY)
            others_d = draw(st.dictionaries(_KEY.filter(lambda k: k != key), _LEAF, max_size=3))
            doc = {**others_d, key: doc}
            path.insert(0, key)
    shown = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    return json.dumps(doc).replace('"__HUGE__"', "1e400").encode(), shown


@given(_document_with_a_huge_number())
def test_the_named_field_is_where_the_number_is(case: tuple[bytes, str]) -> None:
    raw, path = case
    assert _reason(raw) == f"Number out of range - at `{path}` (1e400)"


def test_out_of_range_gives_the_field_apart_for_a_caller_that_names_it() -> None:
    raw = b'{"budget": {"usd": 1e309}}'
    untyped = "Number out of range - at `$[...][...]`"
    assert out_of_range(raw, untyped) == OutOfRange(reason="Number out of range", path="budget.usd", number="1e309")
    assert out_of_range(b"[1e999]", "Number out of range - at `$[...]`") == OutOfRange(
        reason="Number out of range", path="[0]", number="1e999"
    )
    assert out_of_range(raw, "Expected `int`, got `str` - at `$.budget.usd`") is None  # another reason
    assert out_of_range(b'{"a": 1}', untyped) is None  # no such number in the body


def test_the_messages_route_says_a_number_out_of_range_not_invalid_json() -> None:
    from turnout.adapters.chat_parts import WireError
    from turnout_ingress.surfaces.messages.wire import decode_messages_body

    with pytest.raises(WireError) as huge:
        decode_messages_body(b'{"model":"m","max_tokens":1e400}')
    assert str(huge.value).startswith(
        "max_tokens: the request body holds a number out of range (Number out of range - at `max_tokens`"
    )
    assert huge.value.param == "max_tokens"
    with pytest.raises(WireError) as broken:
        decode_messages_body(b'{"model":')
    assert str(broken.value).startswith("body: the request body is not valid JSON (")
