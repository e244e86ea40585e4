"""The Azure OpenAI family: the request sent (deployment URL, api-version, `api-key`, never
Bearer), the answers read (the content filter's 400 and `finish_reason: content_filter` as
content policy, rate-limit hints), and its place in the registry."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
import pytest

from turnout.adapters.azure_openai import (
    AZURE_CHAT,
    AZURE_COMPLETIONS,
    AZURE_EMBEDDINGS,
    deployment_path,
    filtered_outcome,
)
from turnout.adapters.base import AttemptResult, CallSpec
from turnout.adapters.families import FAMILIES, OTHER_OPERATIONS, family_for
from turnout.adapters.openai_chat import outcome_of_response
from turnout.adapters.translated import FILTERED
from turnout.core.classify import classify, disposition
from turnout.core.native import CHAT
from turnout.core.types import Disposition, FailureKind, Target

NOW = 1_700_000_000.0
BASE = "https://myres.openai.azure.com"
VERSION = "2024-10-21"


def _spec(model: str = "gpt4o-prod", *, operation: str = "chat", base_url: str = BASE) -> CallSpec:
    return CallSpec(
        target=Target(provider="azure", model=model, catalog_model="gpt"),
        base_url=base_url,
        api_key="azure-key-123",
        body=b'{"model":"gpt4o-prod","messages":[{"role":"user","content":"hi"}]}',
        timeout_s=5.0,
        request_id="req-1",
        kind="azure_openai",
        operation=operation,  # type: ignore[arg-type]
        api_version=VERSION,
    )


def _chat(*finish_reasons: str, usage: dict[str, int] | None = None) -> bytes:
    choices = [
        {"index": i, "message": {"role": "assistant", "content": None}, "finish_reason": reason}
        for i, reason in enumerate(finish_reasons)
    ]
    return msgspec.json.encode({"id": "chatcmpl-1", "object": "chat.completion", "choices": choices, "usage": usage})


@pytest.mark.parametrize(
    ("operation", "path"),
    [
        ("chat", "/openai/deployments/gpt4o-prod/chat/completions"),
        ("embeddings", "/openai/deployments/gpt4o-prod/embeddings"),
        ("completions", "/openai/deployments/gpt4o-prod/completions"),
    ],
    ids=["chat", "embeddings", "completions"],
)
async def test_request_goes_to_the_deployment_with_api_version_and_the_api_key_header(
    operation: str, path: str
) -> None:
    family = family_for("azure_openai", operation)  # type: ignore[arg-type]
    assert family is not None
    async with httpx.AsyncClient() as client:
        request = family.build_request(client, _spec(operation=operation), stream=False)
    assert isinstance(request, httpx.Request)
    assert request.method == "POST"
    assert str(request.url) == f"{BASE}{path}?api-version={VERSION}"
    assert request.headers["api-key"] == "azure-key-123"
    assert "authorization" not in request.headers
    assert "Bearer" not in str(request.headers.raw)
    assert request.headers["x-request-id"] == "req-1"
    assert request.content == _spec().body  # the body as is, its `model` kept


async def test_a_stream_asks_for_events_and_a_trailing_slash_in_base_url_is_dropped() -> None:
    async with httpx.AsyncClient() as client:
        request = AZURE_CHAT.build_request(client, _spec(base_url=BASE + "/"), stream=True)
    assert request.headers["accept"] == "text/event-stream"
    assert request.url.path == "/openai/deployments/gpt4o-prod/chat/completions"
    assert request.url.params["api-version"] == VERSION


@pytest.mark.parametrize(
    ("deployment", "expected"),
    [
        ("gpt-4o.prod_1", "/openai/deployments/gpt-4o.prod_1/chat/completions?api-version=2024-10-21"),
        ("dep~429ra2,200", "/openai/deployments/dep~429ra2%2C200/chat/completions?api-version=2024-10-21"),
        ("a/b?c", "/openai/deployments/a%2Fb%3Fc/chat/completions?api-version=2024-10-21"),
    ],
    ids=["plain", "scenario", "reserved"],
)
def test_deployment_path_quotes_the_deployment_name(deployment: str, expected: str) -> None:
    assert deployment_path(deployment, "/chat/completions", VERSION) == expected


def test_a_preview_version_is_sent_as_given() -> None:
    assert deployment_path("d", "/embeddings", "2025-01-01-preview").endswith("?api-version=2025-01-01-preview")


def test_registry_names_the_azure_family_for_chat_embeddings_and_completions() -> None:
    assert FAMILIES["azure_openai"] is AZURE_CHAT
    assert OTHER_OPERATIONS[("azure_openai", "embeddings")] is AZURE_EMBEDDINGS
    assert OTHER_OPERATIONS[("azure_openai", "completions")] is AZURE_COMPLETIONS
    assert AZURE_CHAT.native_surface == CHAT
    assert AZURE_CHAT.refusal({"model": "x", "messages": []}, "x") is None


PROMPT_FILTER_400: dict[str, Any] = {
    "error": {
        "message": "The response was filtered due to the prompt triggering Azure OpenAI's content management "
        "policy. Please modify your prompt and retry.",
        "type": None,
        "param": "prompt",
        "code": "content_filter",
        "status": 400,
        "innererror": {
            "code": "ResponsibleAIPolicyViolation",
            "content_filter_result": {"hate": {"filtered": True, "severity": "high"}},
        },
    }
}


def test_the_prompt_filters_400_is_content_policy_not_retried() -> None:
    result = AZURE_CHAT.read_outcome(400, httpx.Headers(), msgspec.json.encode(PROMPT_FILTER_400), NOW)
    assert (result.outcome.status, result.outcome.error_code) == (400, "content_filter")
    kind = classify(result.outcome)
    assert kind is FailureKind.CONTENT_POLICY
    assert disposition(kind) is Disposition.TERMINAL


@pytest.mark.parametrize(
    ("reasons", "filtered"),
    [
        ((FILTERED,), True),
        ((FILTERED, FILTERED), True),
        (("stop",), False),
        (("stop", FILTERED), False),  # one choice served: an answer
        (("length",), False),
    ],
    ids=["one-filtered", "all-filtered", "stop", "one-of-two", "length"],
)
def test_a_completion_ended_by_the_filter_is_content_policy(reasons: tuple[str, ...], filtered: bool) -> None:
    body = _chat(*reasons, usage={"prompt_tokens": 5, "completion_tokens": 2})
    result = AZURE_CHAT.read_outcome(200, httpx.Headers(), body, NOW)
    assert (result.body is None) is filtered
    assert result.usage.input_tokens == 5
    kind = classify(result.outcome)
    assert kind is (FailureKind.CONTENT_POLICY if filtered else FailureKind.SUCCESS)
    if filtered:
        assert result.outcome.error_code == "content_filter" and result.outcome.error_in_body


def test_a_filtered_legacy_completion_is_content_policy_too() -> None:
    body = msgspec.json.encode({"object": "text_completion", "choices": [{"text": "", "finish_reason": FILTERED}]})
    result = AZURE_COMPLETIONS.read_outcome(200, httpx.Headers(), body, NOW)
    assert classify(result.outcome) is FailureKind.CONTENT_POLICY


def test_filtered_outcome_leaves_failures_and_empty_choices_alone() -> None:
    failure = outcome_of_response(503, httpx.Headers(), b"{}", NOW)
    assert filtered_outcome(failure) is failure
    empty = outcome_of_response(200, httpx.Headers(), b'{"choices": []}', NOW)
    assert filtered_outcome(empty) is empty
    odd = AttemptResult(outcome=empty.outcome, body=b"not json")
    assert filtered_outcome(odd) is odd


RATE_LIMIT_MESSAGE = (
    "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded "
    "call rate limit of your current OpenAI S0 pricing tier. Please retry after 7 seconds. Please go here: "
    "https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit."
)


@pytest.mark.parametrize(
    ("headers", "message", "expected_s"),
    [
        ({"retry-after": "7"}, RATE_LIMIT_MESSAGE, 7.0),
        ({"retry-after-ms": "1500", "retry-after": "2"}, RATE_LIMIT_MESSAGE, 1.5),
        ({}, RATE_LIMIT_MESSAGE, 7.0),  # only the message's wording
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "3s"}, "", 3.0),
        ({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "1m0s"}, "", 60.0),
    ],
    ids=["retry-after", "retry-after-ms-first", "message", "reset-requests", "reset-tokens"],
)
def test_an_azure_429_gives_its_retry_hint(headers: dict[str, str], message: str, expected_s: float) -> None:
    body = msgspec.json.encode({"error": {"code": "429", "message": message}})
    result = AZURE_CHAT.read_outcome(429, httpx.Headers(headers), body, NOW)
    assert result.outcome.retry_after_s == expected_s
    assert classify(result.outcome) is FailureKind.RATE_LIMITED


def test_an_azure_401_is_auth() -> None:
    body = (
        b'{"error": {"code": "401", "message": "Access denied due to invalid subscription key or wrong API endpoint."}}'
    )
    result = AZURE_CHAT.read_outcome(401, httpx.Headers(), body, NOW)
    assert classify(result.outcome) is FailureKind.AUTH


def test_embeddings_answers_are_read_as_openais() -> None:
    body = msgspec.json.encode({"object": "list", "data": [{"embedding": [0.1]}], "usage": {"prompt_tokens": 3}})
    result = AZURE_EMBEDDINGS.read_outcome(200, httpx.Headers(), body, NOW)
    assert result.body == body and result.usage.input_tokens == 3
