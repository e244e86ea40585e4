"""`turnout_ingress.serving.idempotency.key_of`: the one `Idempotency-Key` header a request may send."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.datastructures import Headers

from turnout.errors import RequestRejected
from turnout_ingress.serving.idempotency import MAX_KEY_CHARS, key_of

_ASCII_KEY = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=MAX_KEY_CHARS)


def headers(*keys: str, name: bytes = b"idempotency-key") -> Headers:
    return Headers(raw=[(b"authorization", b"Bearer x"), *((name, key.encode("latin-1")) for key in keys)])


def test_no_header_is_no_key() -> None:
    assert key_of(headers()) is None


@given(_ASCII_KEY)
def test_one_key_within_bounds_is_read_as_sent(key: str) -> None:
    assert key_of(headers(key)) == key


def test_the_header_name_is_read_in_any_case() -> None:
    assert key_of(Headers(headers={"IDEMPOTENCY-KEY": "order-2"})) == "order-2"


@given(st.lists(_ASCII_KEY, min_size=2, max_size=5))
def test_two_or_more_headers_are_refused_naming_how_many(keys: list[str]) -> None:
    with pytest.raises(RequestRejected) as caught:
        key_of(headers(*keys))
    assert caught.value.status_code == 400
    assert caught.value.param == "Idempotency-Key"
    assert caught.value.message == f"Send one `Idempotency-Key` header; this request has {len(keys)}."


@pytest.mark.parametrize("key", ["", "k" * (MAX_KEY_CHARS + 1)])
def test_a_key_outside_1_to_255_characters_is_refused(key: str) -> None:
    with pytest.raises(RequestRejected) as caught:
        key_of(headers(key))
    assert (caught.value.status_code, caught.value.param) == (400, "Idempotency-Key")
    assert "1 to 255 characters" in caught.value.message


def test_a_key_of_255_characters_is_kept() -> None:
    assert key_of(headers("k" * MAX_KEY_CHARS)) == "k" * MAX_KEY_CHARS
