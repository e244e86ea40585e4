"""A native call to an Anthropic provider (SPEC §13): the request carries the client's body and
its `anthropic-version` / `anthropic-beta`, the answer is kept as the provider sent it while its
usage (cache reads and writes included) is still read, and refusals follow the family."""

from __future__ import annotations

import json

import httpx
import pytest

from turnout.adapters.anthropic_chat import ANTHROPIC_MESSAGES, outcome_of_message
from turnout.adapters.anthropic_wire import ANTHROPIC_VERSION, upstream_headers
from turnout.adapters.base import CallSpec, Refusal, Usage
from turnout.adapters.openai_chat import OPENAI_CHAT
from turnout.core.native import CHAT, MESSAGES, Native
from turnout.core.types import Target

MESSAGE = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [
        {"type": "thinking", "thinking": "let me see", "signature": "sig=="},
        {"type": "text", "text": "hello"},
    ],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 10,
        "cache_creation_input_tokens": 200,
        "cache_read_input_tokens": 3000,
        "output_tokens": 7,
        "service_tier": "standard",
    },
}


@pytest.mark.parametrize(
    ("passed", "expected"),
    [
        ((), [("anthropic-version", ANTHROPIC_VERSION)]),
        ((("anthropic-version", "2099-01-01"),), [("anthropic-version", "2099-01-01")]),
        (
            (("anthropic-beta", "prompt-caching-2024-07-31,token-efficient-tools-2025-02-19"),),
            [
                ("anthropic-version", ANTHROPIC_VERSION),
                ("anthropic-beta", "prompt-caching-2024-07-31,token-efficient-tools-2025-02-19"),
            ],
        ),
        (
            (
                ("anthropic-beta", "a"),
                ("anthropic-version", "v1"),
                ("anthropic-beta", "b"),
                ("anthropic-version", "v2"),
            ),
            [("anthropic-version", "v1"), ("anthropic-beta", "a,b")],
        ),
    ],
    ids=["none_sent_default_version", "client_version", "one_beta_as_sent", "two_betas_joined_first_version"],
)
def test_upstream_headers_pass_the_clients_version_and_betas(
    passed: tuple[tuple[str, str], ...], expected: list[tuple[str, str]]
) -> None:
    assert upstream_headers(passed) == expected


def test_a_native_message_is_kept_as_sent_and_its_usage_counts_the_cache() -> None:
    content = json.dumps(MESSAGE).encode()
    result = outcome_of_message(200, httpx.Headers(), content, 1_700_000_000.0, native=True)
    assert result.body == content and result.shape == MESSAGES
    assert result.usage == Usage(input_tokens=3210, output_tokens=7)  # cache reads and writes are input
    translated = outcome_of_message(200, httpx.Headers(), content, 1_700_000_000.0)
    assert translated.shape == CHAT and json.loads(translated.body or b"")["object"] == "chat.completion"
    assert translated.usage == result.usage


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        (200, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        (200, {"type": "not-a-message"}),
    ],
    ids=["error_status", "error_in_2xx", "malformed"],
)
def test_a_native_failure_is_read_as_any_failure(status: int, body: dict[str, object]) -> None:
    native = outcome_of_message(status, httpx.Headers(), json.dumps(body).encode(), 0.0, native=True)
    plain = outcome_of_message(status, httpx.Headers(), json.dumps(body).encode(), 0.0)
    assert native == plain and native.body is None


def _spec(native: Native | None, body: bytes) -> CallSpec:
    return CallSpec(
        target=Target(provider="claude", model="claude-up", catalog_model="claude"),
        base_url="https://api.anthropic.example",
        api_key="sk-ant-target-key",
        body=body,
        timeout_s=5.0,
        request_id="rid-1",
        kind="anthropic",
        native=native,
    )


async def test_a_native_request_sends_the_body_as_is_with_the_targets_key_and_the_clients_headers() -> None:
    body = b'{"model":"claude-up","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"x_new":1}'
    native = Native(surface=MESSAGES, body=b"{}", headers=(("anthropic-beta", "b1,b2"),))
    async with httpx.AsyncClient() as client:
        for stream in (False, True):
            request = ANTHROPIC_MESSAGES.build_request(client, _spec(native, body), stream=stream)
            assert isinstance(request, httpx.Request)
            assert request.url == "https://api.anthropic.example/v1/messages"
            assert request.content == body
            assert request.headers["x-api-key"] == "sk-ant-target-key"
            assert request.headers["anthropic-version"] == ANTHROPIC_VERSION
            assert request.headers["anthropic-beta"] == "b1,b2"
            assert request.headers["x-request-id"] == "rid-1"
            assert (request.headers["accept"] == "text/event-stream") is stream


CHAT_REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "n": 3}


def test_a_messages_request_is_never_refused_by_the_anthropic_family() -> None:
    native = Native(surface=MESSAGES, body=b"{}", crossing=("no translation", "messages.0.content.0"))
    assert ANTHROPIC_MESSAGES.refusal(CHAT_REQUEST, "c", native) is None  # n=3 would be refused translated
    assert ANTHROPIC_MESSAGES.refusal(CHAT_REQUEST, "c") == Refusal(
        "`n` greater than 1 is not supported by Anthropic providers.", "n"
    )


def test_an_openai_target_refuses_only_a_messages_request_without_translation() -> None:
    untranslatable = Native(surface=MESSAGES, body=b"{}", crossing=("no translation", "messages.0.content.0"))
    assert OPENAI_CHAT.refusal(CHAT_REQUEST, "g", untranslatable) == Refusal("no translation", "messages.0.content.0")
    assert OPENAI_CHAT.refusal(CHAT_REQUEST, "g", Native(surface=MESSAGES, body=b"{}")) is None
    assert OPENAI_CHAT.refusal(CHAT_REQUEST, "g") is None
    assert ANTHROPIC_MESSAGES.native_surface == MESSAGES and OPENAI_CHAT.native_surface == CHAT
