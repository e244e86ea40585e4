"""Embeddings and legacy completions on the OpenAI family: the request sent, the answer read,
and which (kind, operation) pairs exist."""

from __future__ import annotations

import httpx
import msgspec
import pytest

from turnout.adapters.base import CallSpec
from turnout.adapters.families import FAMILIES, OTHER_OPERATIONS, family_for
from turnout.adapters.openai_chat import OPENAI_CHAT
from turnout.adapters.openai_operations import (
    OPENAI_COMPLETIONS,
    OPENAI_EMBEDDINGS,
    outcome_of_completion,
    outcome_of_embeddings,
)
from turnout.core.types import Target, TransportError

NOW = 1_700_000_000.0
EMBEDDING = msgspec.json.encode(
    {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}],
        "model": "e-1",
        "usage": {"prompt_tokens": 7, "total_tokens": 7},
    }
)
COMPLETION = msgspec.json.encode(
    {
        "id": "cmpl-1",
        "object": "text_completion",
        "choices": [{"text": "hello", "index": 0, "finish_reason": "stop", "logprobs": None}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
)


def test_an_embeddings_answer_is_a_success_with_its_prompt_tokens_and_the_body_as_sent() -> None:
    result = outcome_of_embeddings(200, httpx.Headers(), EMBEDDING, NOW)
    assert result.body == EMBEDDING
    assert (result.usage.input_tokens, result.usage.output_tokens) == (7, 0)
    assert result.outcome.status == 200 and result.outcome.transport is None


def test_a_completion_answer_is_a_success_with_both_token_counts() -> None:
    result = outcome_of_completion(200, httpx.Headers(), COMPLETION, NOW)
    assert result.body == COMPLETION
    assert (result.usage.input_tokens, result.usage.output_tokens) == (3, 1)


@pytest.mark.parametrize("read", [outcome_of_embeddings, outcome_of_completion])
def test_an_error_status_keeps_the_providers_status_type_and_retry_hint(read) -> None:  # type: ignore[no-untyped-def]
    body = b'{"error": {"message": "slow down", "type": "rate_limit_error", "code": "rate_limit_exceeded"}}'
    result = read(429, httpx.Headers({"retry-after": "3"}), body, NOW)
    assert result.body is None
    assert (result.outcome.status, result.outcome.error_type, result.outcome.retry_after_s) == (
        429,
        "rate_limit_error",
        3.0,
    )


@pytest.mark.parametrize("read", [outcome_of_embeddings, outcome_of_completion])
def test_a_2xx_error_envelope_is_never_a_success(read) -> None:  # type: ignore[no-untyped-def]
    result = read(200, httpx.Headers(), b'{"error": {"message": "overloaded", "type": "server_error"}}', NOW)
    assert result.body is None and result.outcome.error_in_body


@pytest.mark.parametrize(
    ("read", "body"),
    [
        (outcome_of_embeddings, COMPLETION),  # a chat-shaped answer to an embeddings call
        (outcome_of_embeddings, b"not json"),
        (outcome_of_completion, EMBEDDING),
        (outcome_of_completion, b""),
    ],
)
def test_a_2xx_of_another_shape_is_a_protocol_failure(read, body: bytes) -> None:  # type: ignore[no-untyped-def]
    result = read(200, httpx.Headers(), body, NOW)
    assert result.body is None and result.outcome.transport is TransportError.PROTOCOL


@pytest.mark.parametrize(
    ("family", "path"), [(OPENAI_EMBEDDINGS, "/v1/embeddings"), (OPENAI_COMPLETIONS, "/v1/completions")]
)
def test_the_request_goes_to_the_operations_endpoint_with_the_body_as_given(family, path: str) -> None:  # type: ignore[no-untyped-def]
    spec = CallSpec(
        target=Target(provider="p", model="m", catalog_model="m"),
        base_url="http://up.test/v1",
        api_key="sk-secret",
        body=b'{"model":"m","input":"x"}',
        timeout_s=5,
        request_id="rid",
    )
    client = httpx.AsyncClient()
    request = family.build_request(client, spec, stream=False)
    assert request.method == "POST" and str(request.url) == f"http://up.test{path}"
    assert request.headers["authorization"] == "Bearer sk-secret"
    assert request.headers["x-request-id"] == "rid"
    assert request.content == spec.body


def test_family_for_chat_is_the_kinds_family_and_other_operations_only_where_the_api_has_them() -> None:
    for kind, family in FAMILIES.items():
        assert family_for(kind) is family
    assert family_for("openai", "embeddings") is OPENAI_EMBEDDINGS
    assert family_for("openai_compatible", "completions") is OPENAI_COMPLETIONS
    assert family_for("anthropic", "embeddings") is None
    assert family_for("anthropic", "completions") is None
    assert family_for("openai", "chat") is OPENAI_CHAT
    assert {kind for kind, _ in OTHER_OPERATIONS} <= set(FAMILIES)
