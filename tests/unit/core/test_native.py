"""The native carry's pure rules (SPEC §13 "same family, same bytes"): an attempt changes only
`model` and `provider` of the client's body, and passes only the surface's provider headers."""

from __future__ import annotations

import json

import msgspec
import pytest

from turnout.core.native import CHAT, MESSAGES, PASSED_HEADERS, RESPONSES, Native, native_body, passed_headers

CLIENT = {
    "model": "claude-catalog-id",
    "max_tokens": 1024,
    "system": [{"type": "text", "text": "be terse", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "system", "content": "late system"},
        {"role": "user", "content": [{"type": "text", "text": "hi é ✓", "cache_control": {"type": "ephemeral"}}]},
    ],
    "thinking": {"type": "enabled", "budget_tokens": 2048},
    "metadata": {"user_id": "u-1"},
    "top_k": 5,
    "service_tier": "auto",
    "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
    "output_config": {"effort": "high"},
    "a_field_from_next_year": [1, 2.5, None, True, {"deep": "x"}],
    "stream": True,
}


def test_native_body_changes_only_the_model_and_keeps_every_other_field_in_order() -> None:
    sent = json.dumps(CLIENT).encode()
    upstream = json.loads(native_body(sent, "claude-sonnet-4-5-20250929"))
    assert upstream == {**CLIENT, "model": "claude-sonnet-4-5-20250929"}
    assert list(upstream) == list(CLIENT)


def test_native_body_removes_the_gateways_provider_object_and_nothing_else() -> None:
    sent = json.dumps({**CLIENT, "provider": {"only": ["anthropic"]}}).encode()
    assert json.loads(native_body(sent, "m")) == {**CLIENT, "model": "m"}


def test_native_body_keeps_a_body_without_model_and_adds_it() -> None:
    assert json.loads(native_body(b'{"max_tokens": 5}', "m")) == {"max_tokens": 5, "model": "m"}


@pytest.mark.parametrize(("body", "error"), [(b"{nope", ValueError), (b"[1]", TypeError), (b'"x"', TypeError)])
def test_native_body_refuses_what_is_not_a_json_object(body: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        native_body(body, "m")


def test_the_messages_surface_passes_its_anthropic_headers_as_sent_in_order() -> None:
    headers = [
        ("Authorization", "Bearer tk-1"),
        ("X-Api-Key", "tk-1"),
        ("Anthropic-Version", "2023-06-01"),
        ("anthropic-beta", "prompt-caching-2024-07-31"),
        ("content-type", "application/json"),
        ("anthropic-beta", "context-1m-2025-08-07, files-api-2025-04-14"),
        ("anthropic-dangerous-direct-browser-access", "true"),
        ("x-stainless-os", "Linux"),
    ]
    assert passed_headers(MESSAGES, headers) == (
        ("anthropic-version", "2023-06-01"),
        ("anthropic-beta", "prompt-caching-2024-07-31"),
        ("anthropic-beta", "context-1m-2025-08-07, files-api-2025-04-14"),
    )


@pytest.mark.parametrize("surface", ["embeddings", ""])
def test_a_surface_without_a_list_passes_no_header(surface: str) -> None:
    assert passed_headers(surface, [("anthropic-beta", "x"), ("openai-beta", "y")]) == ()


@pytest.mark.parametrize("surface", [RESPONSES, CHAT])
def test_the_openai_surfaces_pass_openai_beta_only(surface: str) -> None:
    headers = [("OpenAI-Beta", "responses=v1"), ("anthropic-beta", "x"), ("authorization", "Bearer k")]
    assert passed_headers(surface, headers) == (("openai-beta", "responses=v1"),)


def test_only_the_listed_provider_headers_pass() -> None:
    assert dict(PASSED_HEADERS) == {
        MESSAGES: frozenset({"anthropic-version", "anthropic-beta"}),
        RESPONSES: frozenset({"openai-beta"}),
        CHAT: frozenset({"openai-beta"}),
    }


def test_a_payload_without_a_native_carry_decodes_as_before_and_the_carry_round_trips() -> None:
    carry = Native(surface=MESSAGES, body=b"{}", headers=(("anthropic-beta", "b"),), crossing=("why", "messages.0"))
    encoded = msgspec.msgpack.encode(carry)
    assert msgspec.msgpack.decode(encoded, type=Native) == carry
    assert msgspec.msgpack.decode(msgspec.msgpack.encode({"surface": MESSAGES, "body": b"{}"}), type=Native) == Native(
        surface=MESSAGES, body=b"{}"
    )
