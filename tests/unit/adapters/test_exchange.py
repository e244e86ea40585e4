"""Both API families through the one exchange, over `httpx.MockTransport`.

Each case runs for the OpenAI family and for the Anthropic family: the same
behaviour is expected from both (bodies leave the adapter OpenAI-shaped).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import msgspec
import pytest

from support.answers import ANTHROPIC_MESSAGE, ERROR, SUCCESS
from turnout.adapters.base import AttemptResult, CallSpec
from turnout.adapters.exchange import call_json, open_stream
from turnout.config import ProviderKind
from turnout.core.classify import classify
from turnout.core.types import FailureKind, Target, TransportError

Handler = Callable[[httpx.Request], Any]


def _openai_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _sse(events: list[tuple[str, Any]]) -> bytes:
    out = b""
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        out += (f"event: {name}\n" if name else "").encode() + f"data: {text}\n\n".encode()
    return out


STREAM: dict[str, bytes] = {
    "openai": b": keep-alive\n\n"
    + _sse(
        [
            ("", _openai_chunk({"role": "assistant", "content": ""})),
            ("", _openai_chunk({"content": "Hel"})),
            ("", _openai_chunk({"content": "lo"})),
            ("", _openai_chunk({}, "stop")),
            ("", "[DONE]"),
        ]
    ),
    "anthropic": _sse(
        [
            (
                "message_start",
                {"type": "message_start", "message": {**ANTHROPIC_MESSAGE, "content": [], "stop_reason": None}},
            ),
            ("ping", {"type": "ping"}),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    ),
}
STREAM_ERROR: dict[str, bytes] = {
    "openai": _sse([("", _openai_chunk({"role": "assistant", "content": ""})), ("", ERROR["openai"])]),
    "anthropic": _sse(
        [("message_start", {"type": "message_start", "message": ANTHROPIC_MESSAGE}), ("error", ERROR["anthropic"])]
    ),
}
MALFORMED: dict[str, bytes] = {
    "openai": _sse([("", _openai_chunk({"role": "assistant", "content": ""}))]) + b'data: {"choices": [\n\n',
    "anthropic": _sse([("message_start", {"type": "message_start", "message": ANTHROPIC_MESSAGE})])
    + b'event: content_block_delta\ndata: {"type": \n\n',
}
FAMILIES: list[ProviderKind] = ["openai", "anthropic"]
REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _spec(
    kind: ProviderKind,
    *,
    stream: bool = False,
    timeout_s: float = 5.0,
    ttft_timeout_s: float | None = None,
    body: dict[str, Any] | None = None,
) -> CallSpec:
    payload = {**(body or REQUEST), **({"stream": True} if stream else {})}
    return CallSpec(
        target=Target(provider="p", model="m", catalog_model="m"),
        base_url="https://api.example.test/" if kind == "anthropic" else "https://api.example.test/v1/",
        api_key="sk-test",
        body=json.dumps(payload).encode(),
        timeout_s=timeout_s,
        ttft_timeout_s=ttft_timeout_s,
        request_id="rid-1",
        kind=kind,
    )


async def _run(
    kind: ProviderKind, handler: Handler, *, stream: bool = False, **spec: Any
) -> tuple[AttemptResult, list[httpx.Request], list[tuple[str, str]]]:
    seen: list[httpx.Request] = []

    async def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = handler(request)
        return await answer if asyncio.iscoroutine(answer) else answer  # type: ignore[no-any-return]

    async with httpx.AsyncClient(transport=httpx.MockTransport(record)) as client:
        result = await (open_stream if stream else call_json)(client, _spec(kind, stream=stream, **spec))
        rest: list[tuple[str, str]] = []
        if result.stream is not None:
            rest = [(e.event, e.data) for e in result.stream.pending]
            rest += [(e.event, e.data) async for batch in result.stream.events for e in batch]
            await result.stream.aclose()
    return result, seen, rest


def _json(status: int, data: Any, headers: dict[str, str] | None = None) -> Handler:
    return lambda _: httpx.Response(status, json=data, headers=headers)


def _events(content: bytes) -> Handler:
    return lambda _: httpx.Response(200, content=content, headers={"content-type": "text/event-stream"})


# ------------------------------------------------------------------ requests


@pytest.mark.parametrize(
    ("kind", "url", "credential"),
    [
        ("openai", "https://api.example.test/v1/chat/completions", ("authorization", "Bearer sk-test")),
        ("openai_compatible", "https://api.example.test/v1/chat/completions", ("authorization", "Bearer sk-test")),
        ("anthropic", "https://api.example.test/v1/messages", ("x-api-key", "sk-test")),
    ],
)
async def test_request_goes_to_the_family_endpoint_with_its_credential(
    kind: ProviderKind, url: str, credential: tuple[str, str]
) -> None:
    _, [request], _ = await _run(kind, _json(200, SUCCESS["anthropic" if kind == "anthropic" else "openai"]))
    assert str(request.url) == url and request.method == "POST"
    assert request.headers[credential[0]] == credential[1]
    assert request.headers["x-request-id"] == "rid-1" and request.headers["accept"] == "*/*"


@pytest.mark.parametrize("kind", FAMILIES)
async def test_stream_request_asks_for_sse(kind: ProviderKind) -> None:
    _, [request], _ = await _run(kind, _events(STREAM[kind]), stream=True)
    assert request.headers["accept"] == "text/event-stream"
    assert json.loads(request.content)["stream"] is True


async def test_untranslatable_anthropic_request_is_a_400_without_a_call() -> None:
    result, seen, _ = await _run("anthropic", _json(200, ANTHROPIC_MESSAGE), body={**REQUEST, "n": 2})
    assert seen == [] and result.outcome.status == 400
    assert classify(result.outcome) is FailureKind.CLIENT_ERROR


# ------------------------------------------------------------ complete answers


@pytest.mark.parametrize("kind", FAMILIES)
async def test_json_success_is_an_openai_completion_with_usage(kind: ProviderKind) -> None:
    result, _, _ = await _run(kind, _json(200, SUCCESS[kind]))
    assert classify(result.outcome) is FailureKind.SUCCESS
    assert result.body is not None
    completion = json.loads(result.body)
    assert completion["choices"][0]["message"]["content"] == "hi"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (3, 2)


@pytest.mark.parametrize("kind", FAMILIES)
async def test_error_status_keeps_status_type_message_and_retry_after(kind: ProviderKind) -> None:
    result, _, _ = await _run(kind, _json(429, ERROR[kind], {"retry-after": "7"}))
    outcome = result.outcome
    assert result.body is None
    assert (outcome.status, outcome.message, outcome.retry_after_s) == (429, "slow down", 7.0)
    assert outcome.error_type in ("rate_limit_exceeded", "rate_limit_error") and not outcome.error_in_body
    assert classify(outcome) is FailureKind.RATE_LIMITED


@pytest.mark.parametrize("kind", FAMILIES)
async def test_error_envelope_in_a_2xx_is_never_a_success(kind: ProviderKind) -> None:
    result, _, _ = await _run(kind, _json(200, ERROR[kind]))
    assert result.body is None and result.outcome.error_in_body
    assert classify(result.outcome) is FailureKind.RATE_LIMITED


@pytest.mark.parametrize("kind", FAMILIES)
async def test_2xx_that_is_not_an_answer_is_malformed(kind: ProviderKind) -> None:
    result, _, _ = await _run(kind, _json(200, {"hello": "world"}))
    assert result.outcome.transport is TransportError.PROTOCOL
    assert classify(result.outcome) is FailureKind.MALFORMED


@pytest.mark.parametrize("kind", FAMILIES)
async def test_transport_exception_becomes_an_outcome(kind: ProviderKind) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    for stream in (False, True):
        result, _, _ = await _run(kind, refuse, stream=stream)
        assert result.outcome.transport is TransportError.CONNECT
        assert "ConnectError" in result.outcome.message


@pytest.mark.parametrize("kind", FAMILIES)
async def test_no_answer_within_the_attempt_limit_is_a_timeout(kind: ProviderKind) -> None:
    async def never(_: httpx.Request) -> httpx.Response:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    result, _, _ = await _run(kind, never, timeout_s=0.01)
    assert result.outcome.transport is TransportError.ATTEMPT_TIMEOUT


# -------------------------------------------------------------------- streams


@pytest.mark.parametrize("kind", FAMILIES)
async def test_stream_commits_at_first_content_with_the_frames_before_it_held(kind: ProviderKind) -> None:
    result, _, rest = await _run(kind, _events(STREAM[kind]), stream=True)
    assert classify(result.outcome) is FailureKind.SUCCESS and result.stream is not None
    assert not result.stream.done
    held = [json.loads(d)["choices"][0]["delta"] for d in result.stream.held]
    assert held == [{"role": "assistant", "content": ""}, {"content": "Hel"}]
    assert json.loads(rest[0][1])["choices"][0]["delta"] == {"content": "lo"}
    assert rest[-1][1] == "[DONE]"


@pytest.mark.parametrize("kind", FAMILIES)
async def test_error_before_first_content_is_a_failed_attempt(kind: ProviderKind) -> None:
    result, _, _ = await _run(kind, _events(STREAM_ERROR[kind]), stream=True)
    assert result.stream is None and result.outcome.error_in_body
    assert result.outcome.message == "slow down"
    assert classify(result.outcome) is FailureKind.RATE_LIMITED


@pytest.mark.parametrize("kind", FAMILIES)
async def test_malformed_sse_before_first_content_is_malformed(kind: ProviderKind) -> None:
    result, _, _ = await _run(kind, _events(MALFORMED[kind]), stream=True)
    assert result.stream is None and result.outcome.transport is TransportError.PROTOCOL
    assert classify(result.outcome) is FailureKind.MALFORMED


@pytest.mark.parametrize(("kind", "marker"), [("openai", "[DONE]"), ("anthropic", "message_stop")])
async def test_stream_ending_before_content_is_a_reset_naming_the_family_marker(
    kind: ProviderKind, marker: str
) -> None:
    cut = STREAM[kind].split(b"Hel")[0].rsplit(b"\n\n", 1)[0] + b"\n\n"
    result, _, _ = await _run(kind, _events(cut), stream=True)
    assert result.outcome.transport is TransportError.RESET
    assert result.outcome.message.endswith(marker)


@pytest.mark.parametrize("kind", FAMILIES)
async def test_error_status_on_a_stream_request_keeps_its_outcome(kind: ProviderKind) -> None:
    result, _, _ = await _run(kind, _json(429, ERROR[kind]), stream=True)
    assert result.stream is None and result.outcome.status == 429
    assert classify(result.outcome) is FailureKind.RATE_LIMITED


@pytest.mark.parametrize("kind", FAMILIES)
async def test_json_success_answering_a_stream_request_is_malformed(kind: ProviderKind) -> None:
    result, _, _ = await _run(kind, _json(200, SUCCESS[kind]), stream=True)
    assert result.stream is None and classify(result.outcome) is FailureKind.MALFORMED


@pytest.mark.parametrize("kind", FAMILIES)
async def test_first_token_limit_is_a_first_token_timeout(kind: ProviderKind) -> None:
    async def stall(_: httpx.Request) -> httpx.Response:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    result, _, _ = await _run(kind, stall, stream=True, timeout_s=5.0, ttft_timeout_s=0.01)
    assert result.outcome.transport is TransportError.FIRST_TOKEN_TIMEOUT


@pytest.mark.parametrize("kind", FAMILIES)
async def test_a_transport_error_is_described_without_its_text(kind: ProviderKind) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(
            "Cannot connect to host 10.1.2.3:8443 [Connect call failed ('10.1.2.3', 8443)]", request=request
        )

    result, _, _ = await _run(kind, refuse)
    assert result.outcome.message == "could not connect to the provider (ConnectError)"


@pytest.mark.parametrize(
    "base_url",
    ["http://[::1/v1", "https://a.example\r\n/v1", "https://xn--/v1", "https://a.example/v1\x00"],
    ids=["ipv6-bracket", "crlf", "idna", "nul"],
)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_an_unparseable_base_url_is_a_connect_failure(base_url: str, stream: bool) -> None:
    sent: list[httpx.Request] = []
    spec = msgspec.structs.replace(_spec("openai", stream=stream), base_url=base_url)

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200)

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as c:
        result = await (open_stream if stream else call_json)(c, spec)
    assert result.outcome.transport is TransportError.CONNECT and result.outcome.status is None
    assert result.outcome.message.startswith("the provider's URL cannot be used (")
    assert not sent
