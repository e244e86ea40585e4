"""`turnout.core.upstream_auth`: where an OpenAI-compatible endpoint takes its key, which extra
headers may be sent (RFC 9110 field names and values, none the gateway sets itself), and the
header pairs an attempt sends."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnout.core.upstream_auth import (
    MAX_HEADERS,
    RESERVED,
    ProviderAuth,
    auth_headers,
    auth_refusal,
    headers_refusal,
    headers_refusals,
)

TOKEN_CHARS = st.sampled_from("!#$%&'*+.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-")
TOKENS = st.text(TOKEN_CHARS, min_size=1, max_size=64).filter(lambda t: t.lower() not in RESERVED | {"authorization"})
VALUES = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=200)


def test_without_auth_the_key_goes_as_a_bearer_token() -> None:
    assert auth_headers("sk-1", None, None) == [("authorization", "Bearer sk-1")]


def test_a_providers_auth_puts_the_key_in_its_header_alone_or_after_its_scheme() -> None:
    assert auth_headers("k", ProviderAuth(header="api-key", scheme=""), None) == [("api-key", "k")]
    assert auth_headers("k", ProviderAuth(header="x-api-key", scheme="Token"), None) == [("x-api-key", "Token k")]


def test_no_key_sends_no_key_header_but_still_the_extra_headers() -> None:
    assert auth_headers("", ProviderAuth(header="api-key", scheme=""), {"X-Org": "a"}) == [("X-Org", "a")]


def test_extra_headers_follow_the_key_header() -> None:
    assert auth_headers("k", None, {"X-Org": "a", "X-Team": "b"}) == [
        ("authorization", "Bearer k"),
        ("X-Org", "a"),
        ("X-Team", "b"),
    ]


@pytest.mark.parametrize(
    ("auth", "param", "words"),
    [
        (ProviderAuth(header="api key"), "p.auth.header", "is not a header name"),
        (ProviderAuth(header=""), "p.auth.header", "is not a header name"),
        (ProviderAuth(header="Content-Type"), "p.auth.header", "set by the gateway itself"),
        (ProviderAuth(header="x-request-id"), "p.auth.header", "set by the gateway itself"),
        (ProviderAuth(header="api-key", scheme="Bearer x"), "p.auth.scheme", "is not an auth scheme"),
    ],
)
def test_an_auth_that_cannot_be_sent_is_refused_naming_the_field(auth: ProviderAuth, param: str, words: str) -> None:
    refused = auth_refusal("p.auth", auth)
    assert refused is not None and refused.param == param and words in refused.reason


@pytest.mark.parametrize(
    ("headers", "auth", "param", "words"),
    [
        ({"X Org": "a"}, None, "p.headers.X Org", "not a header name"),
        ({"Host": "a"}, None, "p.headers.Host", "set by the HTTP client or the gateway itself"),
        ({"Content-Type": "a"}, None, "p.headers.Content-Type", "set by the HTTP client or the gateway itself"),
        ({"Authorization": "Bearer x"}, None, "p.headers.Authorization", "carries the key"),
        ({"api-key": "x"}, ProviderAuth(header="Api-Key", scheme=""), "p.headers.api-key", "carries the key"),
        ({"X-Org": "a", "x-org": "b"}, None, "p.headers.x-org", "given twice"),
        ({"X-Org": ""}, None, "p.headers.X-Org", "a value of 1 to"),
        ({"X-Org": "a\r\nX-Evil: 1"}, None, "p.headers.X-Org", "control character"),
        ({"X-Org": "a\x00"}, None, "p.headers.X-Org", "control character"),
        ({"X-Org": "café"}, None, "p.headers.X-Org", "outside ASCII"),
        ({f"X-H{i}": "v" for i in range(MAX_HEADERS + 1)}, None, "p.headers", f"at most {MAX_HEADERS}"),
    ],
)
def test_extra_headers_that_cannot_be_sent_are_refused_naming_the_header(
    headers: dict[str, str], auth: ProviderAuth | None, param: str, words: str
) -> None:
    refused = headers_refusal("p.headers", headers, auth)
    assert refused is not None and (refused.param, words in refused.reason) == (param, True)
    assert "Bearer x" not in str(refused) and "X-Evil" not in str(refused)  # a value is never quoted


@given(st.dictionaries(TOKENS, VALUES, max_size=MAX_HEADERS))
def test_any_token_name_with_a_printable_value_is_sendable_unless_repeated(headers: dict[str, str]) -> None:
    refused = headers_refusal("p.headers", headers, None)
    repeated = len({h.lower() for h in headers}) < len(headers)
    assert (refused is None) is not repeated


@given(TOKENS, VALUES, st.sampled_from(["\r", "\n", "\x00", "\x7f", "\x1b"]))
def test_a_control_character_anywhere_in_a_value_is_refused(name: str, value: str, bad: str) -> None:
    cut = len(value) // 2
    refused = headers_refusal("p.headers", {name: value[:cut] + bad + value[cut:]}, None)
    assert refused is not None and "control character" in refused.reason


def test_every_header_that_cannot_be_sent_is_named_at_once() -> None:
    headers = {"api-key": "y", "X-Request-Id": "z", "Bad Name": "v", "X-Org": "ok"}
    refused = headers_refusals("p.headers", headers, ProviderAuth(header="api-key", scheme=""))
    assert [r.param for r in refused] == ["p.headers.api-key", "p.headers.X-Request-Id", "p.headers.Bad Name"]
    assert "carries the key" in refused[0].reason and "HTTP client" in refused[1].reason
    assert headers_refusal("p.headers", headers, ProviderAuth(header="api-key", scheme="")) == refused[0]
