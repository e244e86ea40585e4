"""The Gemini family through the one exchange (`httpx.MockTransport`): the request sent (URL,
`x-goog-api-key`, the translated body), answers and streams read into OpenAI's shape, safety
blocks as content policy, Google's errors classified (RESOURCE_EXHAUSTED with its RetryInfo
delay, UNAVAILABLE, DEADLINE_EXCEEDED, INVALID_ARGUMENT, a refused key), and the registry."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from turnout.adapters.base import AttemptResult, CallSpec
from turnout.adapters.exchange import call_json, open_stream
from turnout.adapters.families import FAMILIES, PROVIDER_NAMES, family_for, provider_name
from turnout.adapters.gemini import GEMINI_CHAT, count_tokens_call, model_path
from turnout.adapters.vertex import VERTEX_AI
from turnout.config import ProviderKind
from turnout.core.classify import classify, disposition
from turnout.core.types import Disposition, FailureKind, Target, TransportError

BASE = "https://generativelanguage.googleapis.com"
REQUEST = {"model": "g", "messages": [{"role": "system", "content": "brief"}, {"role": "user", "content": "hi"}]}


def _spec(model: str = "gemini-2.5-flash", body: dict[str, Any] | None = None) -> CallSpec:
    return CallSpec(
        target=Target(provider="gem", model=model, catalog_model="g"),
        base_url=BASE,
        api_key="AIza-key-123",
        body=json.dumps(body or REQUEST).encode(),
        timeout_s=5.0,
        request_id="req-1",
        kind="gemini",
    )


def _answer(parts: list[dict[str, Any]], finish: str | None = "STOP", **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2}, **extra}


def _sse(*events: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\r\n\r\n" for e in events)


async def _run(
    respond: httpx.Response, *, stream: bool = False, spec: CallSpec | None = None
) -> tuple[AttemptResult, httpx.Request, list[str]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return respond

    async with httpx.AsyncClient(transport=httpx.MockTransport(record)) as client:
        result = await (open_stream if stream else call_json)(client, spec or _spec())
        rest: list[str] = []
        if result.stream is not None:
            rest = [*result.stream.held, *(e.data for e in result.stream.pending)]
            rest += [e.data async for batch in result.stream.events for e in batch]
            await result.stream.aclose()
    return result, seen[0], rest


async def test_the_request_goes_to_generate_content_with_the_key_header_and_the_translated_body() -> None:
    result, request, _ = await _run(httpx.Response(200, json=_answer([{"text": "Hello"}])))
    assert str(request.url) == f"{BASE}/v1beta/models/gemini-2.5-flash:generateContent"
    assert request.headers["x-goog-api-key"] == "AIza-key-123" and "authorization" not in request.headers
    assert request.headers["x-request-id"] == "req-1"
    sent = json.loads(request.content)
    assert sent == {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "systemInstruction": {"parts": [{"text": "brief"}]},
    }
    assert classify(result.outcome) is FailureKind.SUCCESS and result.body is not None
    answer = json.loads(result.body)
    assert answer["object"] == "chat.completion" and answer["choices"][0]["message"]["content"] == "Hello"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (3, 2)


async def test_a_stream_is_asked_with_alt_sse_and_translated_chunk_by_chunk() -> None:
    body = _sse(
        _answer([{"text": "Hel"}], None, responseId="r9"),
        _answer([{"functionCall": {"name": "f", "args": {"a": 1}}}], None, responseId="r9"),
        _answer([{"text": ""}], "STOP", responseId="r9"),
    )
    respond = httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
    result, request, frames = await _run(respond, stream=True)
    assert request.url.path.endswith(":streamGenerateContent") and request.url.params["alt"] == "sse"
    assert result.stream is not None and classify(result.outcome) is FailureKind.SUCCESS
    chunks = [json.loads(f) for f in frames if f != "[DONE]"]
    assert frames[-1] == "[DONE]"
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas[0] == {"role": "assistant", "content": ""} and deltas[1] == {"content": "Hel"}
    assert deltas[2]["tool_calls"] == [
        {"index": 0, "id": "call_r9_0", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
    ]
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 2


async def test_a_stream_that_ends_without_its_finish_is_not_done() -> None:
    respond = httpx.Response(
        200, content=_sse(_answer([{"text": "Hel"}], None)), headers={"content-type": "text/event-stream"}
    )
    result, _, frames = await _run(respond, stream=True)
    assert result.stream is not None and "[DONE]" not in frames


@pytest.mark.parametrize(
    "data",
    [
        {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 4}},
        _answer([], "PROHIBITED_CONTENT"),
        _answer([], "BLOCKLIST"),
    ],
    ids=["prompt", "prohibited", "blocklist"],
)
async def test_a_safety_block_is_content_policy_not_retried_answer_or_stream(data: dict[str, Any]) -> None:
    result, _, _ = await _run(httpx.Response(200, json=data))
    assert result.body is None and result.outcome.error_code == "content_filter"
    assert classify(result.outcome) is FailureKind.CONTENT_POLICY
    assert disposition(classify(result.outcome)) is Disposition.TERMINAL
    streamed, _, _ = await _run(
        httpx.Response(200, content=_sse(data), headers={"content-type": "text/event-stream"}), stream=True
    )
    assert streamed.stream is None and classify(streamed.outcome) is FailureKind.CONTENT_POLICY


def _google_error(code: int, status: str, message: str, *details: dict[str, Any]) -> httpx.Response:
    return httpx.Response(
        code, json={"error": {"code": code, "message": message, "status": status, "details": list(details)}}
    )


RETRY = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "20s"}
QUOTA_WORDS = "You exceeded your current quota, please check your plan and billing details."


@pytest.mark.parametrize(
    ("respond", "kind", "retry_after_s"),
    [
        (_google_error(429, "RESOURCE_EXHAUSTED", QUOTA_WORDS, RETRY), FailureKind.RATE_LIMITED, 20.0),
        (
            _google_error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
            FailureKind.RATE_LIMITED,
            None,
        ),
        (_google_error(429, "RESOURCE_EXHAUSTED", QUOTA_WORDS), FailureKind.QUOTA_EXHAUSTED, None),
        (
            _google_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
            FailureKind.SERVER_ERROR,
            None,
        ),
        (
            _google_error(504, "DEADLINE_EXCEEDED", "Deadline expired before operation could complete."),
            FailureKind.TIMEOUT,
            None,
        ),
        (
            _google_error(
                400,
                "INVALID_ARGUMENT",
                "The input token count (1048577) exceeds the maximum number of tokens allowed (1048576).",
            ),
            FailureKind.CONTEXT_LENGTH,
            None,
        ),
        (
            _google_error(400, "INVALID_ARGUMENT", "Request contains an invalid argument."),
            FailureKind.CLIENT_ERROR,
            None,
        ),
        (
            _google_error(
                400,
                "INVALID_ARGUMENT",
                "API key not valid. Please pass a valid API key.",
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"},
            ),
            FailureKind.AUTH,
            None,
        ),
        (_google_error(403, "PERMISSION_DENIED", "The caller does not have permission"), FailureKind.AUTH, None),
    ],
    ids=["retry-info", "exhausted", "spent-quota", "unavailable", "deadline", "context", "invalid", "key", "denied"],
)
async def test_googles_errors_are_classified(
    respond: httpx.Response, kind: FailureKind, retry_after_s: float | None
) -> None:
    result, _, _ = await _run(respond)
    assert classify(result.outcome) is kind
    assert result.outcome.retry_after_s == retry_after_s
    assert result.outcome.error_type == respond.json()["error"]["status"]


async def test_an_error_object_in_a_stream_fails_the_attempt_by_its_status() -> None:
    error = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    result, _, _ = await _run(
        httpx.Response(200, content=_sse(error), headers={"content-type": "text/event-stream"}), stream=True
    )
    assert result.stream is None and classify(result.outcome) is FailureKind.SERVER_ERROR


async def test_a_body_gemini_cannot_express_is_a_400_without_a_call_and_a_refusal_first() -> None:
    body = {
        "model": "g",
        "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}],
    }
    refusal = GEMINI_CHAT.refusal(body, "gemini-2.5-flash")
    assert refusal is not None and refusal.param == "messages[0].content[0].image_url.url"
    async with httpx.AsyncClient() as client:
        built = GEMINI_CHAT.build_request(client, _spec(body=body), stream=False)
    assert isinstance(built, AttemptResult) and built.outcome.status == 400
    assert GEMINI_CHAT.refusal(REQUEST, "gemini-2.5-flash") is None


async def test_a_2xx_that_is_no_answer_is_malformed() -> None:
    result, _, _ = await _run(httpx.Response(200, json={"unexpected": True}))
    assert result.outcome.transport is TransportError.PROTOCOL


def test_a_token_count_wraps_the_translated_request_without_its_generation_config() -> None:
    path, body = count_tokens_call("gemini-2.5-flash", {**REQUEST, "max_tokens": 9})
    assert path == "/v1beta/models/gemini-2.5-flash:countTokens"
    assert body == {
        "generateContentRequest": {
            "model": "models/gemini-2.5-flash",
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "systemInstruction": {"parts": [{"text": "brief"}]},
        }
    }


def test_model_paths_quote_the_model() -> None:
    assert model_path("/v1beta", "g~429ra20,200", stream=False) == "/v1beta/models/g~429ra20%2C200:generateContent"
    assert model_path("/v1beta", "a/b", stream=True) == "/v1beta/models/a%2Fb:streamGenerateContent?alt=sse"


def test_the_registry_names_the_google_families_and_every_provider_name() -> None:
    assert FAMILIES["gemini"] is GEMINI_CHAT and FAMILIES["vertex"] is VERTEX_AI
    assert family_for("gemini", "completions") is None and family_for("vertex", "completions") is None
    kinds: list[ProviderKind] = ["openai", "anthropic", "azure_openai", "gemini", "vertex"]
    assert [provider_name(k, "p") for k in kinds] == [
        "openai",
        "anthropic",
        "azure.ai.openai",
        "gcp.gemini",
        "gcp.vertex_ai",
    ]
    assert provider_name("openai_compatible", "vllm") == "openai" and "openai_compatible" not in PROVIDER_NAMES
