"""`x-turnout-*` headers never fail to encode, whatever name was stored before the write-time checks."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from turnout.answer import header_text


def test_a_printable_ascii_name_is_sent_as_is() -> None:
    assert header_text("gpt-4o-mini~cut3,200") == "gpt-4o-mini~cut3,200"


def test_other_names_are_percent_encoded_as_utf8() -> None:
    assert header_text("w\u2603") == "w%E2%98%83"
    assert header_text("w\u00e9") == "w%C3%A9"
    assert header_text("a\r\nX-Evil: 1") == "a%0D%0AX-Evil:%201"


@given(st.text())
def test_every_name_becomes_a_latin1_header_value_without_control_characters(name: str) -> None:
    value = header_text(name)
    value.encode("latin-1")  # what the HTTP server requires of a header value
    assert all(0x20 <= ord(c) < 0x7F for c in value)
