"""Vertex AI (`vertex`): Gemini models at the project's URL with a Bearer access token, Claude
models by `rawPredict` / `streamRawPredict` with Anthropic's body (no `model`,
`anthropic_version: vertex-2023-10-16`), and the access tokens: made from the service-account
file off the event loop, cached, refreshed before expiry, a failure a 401 of the provider."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from support.google_keys import write_key_file
from turnout.adapters.base import AttemptResult, CallSpec
from turnout.adapters.exchange import call_json, open_stream
from turnout.adapters.google_tokens import REFRESH_MARGIN_S, AccessTokens, authorized
from turnout.adapters.vertex import VERTEX_AI
from turnout.core.classify import classify
from turnout.core.types import FailureKind, Target
from turnout_sim.app import start_in_background

BASE = "https://us-central1-aiplatform.googleapis.com"
PREFIX = "/v1/projects/my-proj/locations/us-central1/publishers"
REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 7}


def _spec(model: str, **fields: Any) -> CallSpec:
    given: dict[str, Any] = {"base_url": BASE, "body": json.dumps(REQUEST).encode(), **fields}
    return CallSpec(
        target=Target(provider="vx", model=model, catalog_model="m"),
        api_key="ya29.token",
        timeout_s=5.0,
        request_id="req-1",
        kind="vertex",
        project="my-proj",
        location="us-central1",
        **given,
    )


async def _build(spec: CallSpec, *, stream: bool = False) -> httpx.Request:
    async with httpx.AsyncClient() as client:
        built = VERTEX_AI.build_request(client, spec, stream=stream)
    assert isinstance(built, httpx.Request)
    return built


async def test_a_gemini_model_goes_to_the_google_publisher_with_the_token_as_bearer() -> None:
    request = await _build(_spec("gemini-2.5-flash"))
    assert str(request.url) == f"{BASE}{PREFIX}/google/models/gemini-2.5-flash:generateContent"
    assert request.headers["authorization"] == "Bearer ya29.token" and "x-goog-api-key" not in request.headers
    assert json.loads(request.content)["generationConfig"] == {"maxOutputTokens": 7}
    streamed = await _build(_spec("gemini-2.5-flash"), stream=True)
    assert streamed.url.path.endswith("/google/models/gemini-2.5-flash:streamGenerateContent")


async def test_a_claude_model_goes_by_raw_predict_with_anthropics_body_without_model() -> None:
    request = await _build(_spec("claude-sonnet-4@20250514"))
    assert str(request.url) == f"{BASE}{PREFIX}/anthropic/models/claude-sonnet-4%4020250514:rawPredict"
    body = json.loads(request.content)
    assert body == {
        "anthropic_version": "vertex-2023-10-16",
        "max_tokens": 7,
        "messages": [{"role": "user", "content": "hi"}],
    }
    streamed = await _build(
        _spec("claude-sonnet-4@20250514", body=json.dumps({**REQUEST, "stream": True}).encode()), stream=True
    )
    assert streamed.url.path.endswith(":streamRawPredict") and json.loads(streamed.content)["stream"] is True


def test_refusals_follow_the_publisher() -> None:
    two = {**REQUEST, "n": 2}
    claude = VERTEX_AI.refusal(two, "claude-sonnet-4")
    assert claude is not None and "Anthropic" in claude.message
    gemini = VERTEX_AI.refusal(two, "gemini-2.5-flash")
    assert gemini is not None and "Gemini" in gemini.message
    assert VERTEX_AI.refusal(REQUEST, "claude-sonnet-4") is None


def test_answers_are_read_by_their_shape() -> None:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }
    read = VERTEX_AI.read_outcome(200, httpx.Headers(), msgspec.json.encode(message), 1.0)
    assert read.body is not None and json.loads(read.body)["choices"][0]["message"]["content"] == "hi"
    gemini = {"candidates": [{"content": {"parts": [{"text": "yo"}]}, "finishReason": "STOP"}]}
    read = VERTEX_AI.read_outcome(200, httpx.Headers(), msgspec.json.encode(gemini), 1.0)
    assert read.body is not None and json.loads(read.body)["choices"][0]["message"]["content"] == "yo"
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    read = VERTEX_AI.read_outcome(529, httpx.Headers(), msgspec.json.encode(overloaded), 1.0)
    assert read.outcome.error_type == "overloaded_error" and classify(read.outcome) is FailureKind.SERVER_ERROR
    exhausted = {
        "error": {"code": 429, "message": "Resource exhausted. Please try again later.", "status": "RESOURCE_EXHAUSTED"}
    }
    read = VERTEX_AI.read_outcome(429, httpx.Headers(), msgspec.json.encode(exhausted), 1.0)
    assert read.outcome.error_type == "RESOURCE_EXHAUSTED" and classify(read.outcome) is FailureKind.RATE_LIMITED


async def test_a_claude_stream_is_anthropics_events_translated() -> None:
    events = [
        (
            "message_start",
            {"type": "message_start", "message": {"id": "m1", "model": "claude", "usage": {"input_tokens": 2}}},
        ),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        ),
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    body = b"".join(f"event: {n}\ndata: {json.dumps(d)}\n\n".encode() for n, d in events)
    tokens = AccessTokens(load=lambda _: object(), refresh=lambda _: ("ya29.t", 1e12))

    def answer(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == "Bearer ya29.t"
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    spec = await authorized(
        _spec("claude-sonnet-4", credentials_file="/sa.json", body=json.dumps({**REQUEST, "stream": True}).encode()),
        tokens,
    )
    assert isinstance(spec, CallSpec) and spec.api_key == "ya29.t"
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:  # the token given: no file
        result = await open_stream(client, msgspec.structs.replace(spec, credentials_file=None))
        assert result.stream is not None
        frames = [*result.stream.held, *(e.data for e in result.stream.pending)]
        frames += [e.data async for batch in result.stream.events for e in batch]
        await result.stream.aclose()
    assert frames[-1] == "[DONE]" and any('"Hi"' in f for f in frames)


class Clock:
    def __init__(self) -> None:
        self.now_s = 1_000.0

    def __call__(self) -> float:
        return self.now_s


async def test_a_token_is_cached_until_its_refresh_margin_then_refreshed_once() -> None:
    clock, made = Clock(), []

    def refresh(credentials: Any) -> tuple[str, float]:
        made.append(credentials)
        return f"ya29.{len(made)}", clock.now_s + 3600

    tokens = AccessTokens(clock=clock, load=lambda path: f"creds:{path}", refresh=refresh)
    assert await tokens.token("/a.json") == "ya29.1"
    clock.now_s += 3600 - REFRESH_MARGIN_S - 1
    assert await tokens.token("/a.json") == "ya29.1"
    clock.now_s += 2  # within the margin: one refresh for the callers that came together
    assert set(await asyncio.gather(*(tokens.token("/a.json") for _ in range(5)))) == {"ya29.2"}
    assert made == ["creds:/a.json", "creds:/a.json"]
    assert await tokens.token("/b.json") == "ya29.3"  # per file


async def test_a_token_failure_is_a_401_of_the_provider_held_for_a_while() -> None:
    clock, calls = Clock(), []

    def refresh(_: Any) -> tuple[str, float]:
        calls.append(1)
        raise OSError("connection refused by 10.0.0.1")

    tokens = AccessTokens(clock=clock, load=lambda _: object(), refresh=refresh)
    failed = await authorized(_spec("gemini-2.5-flash", credentials_file="/sa.json"), tokens)
    assert isinstance(failed, AttemptResult) and failed.outcome.status == 401
    assert classify(failed.outcome) is FailureKind.AUTH and "10.0.0.1" not in failed.outcome.message
    again = await authorized(_spec("gemini-2.5-flash", credentials_file="/sa.json"), tokens)
    assert isinstance(again, AttemptResult) and len(calls) == 1  # held: not asked again at once
    clock.now_s += 10
    await authorized(_spec("gemini-2.5-flash", credentials_file="/sa.json"), tokens)
    assert len(calls) == 2


async def test_a_spec_without_a_credentials_file_keeps_its_key() -> None:
    spec = _spec("gemini-2.5-flash")
    assert await authorized(spec, AccessTokens(load=lambda _: pytest.fail("no file"))) is spec


async def test_google_auth_gets_a_token_from_the_files_token_uri_and_an_unreadable_file_fails(tmp_path: Path) -> None:
    runner, url = await start_in_background("127.0.0.1", 0)
    try:
        tokens = AccessTokens()
        key = write_key_file(tmp_path / "sa.json", url + "/token")
        token = await tokens.token(str(key))
        assert token.startswith("ya29.sim")
        async with httpx.AsyncClient() as client:
            spec = _spec("gemini-2.5-flash", base_url=url, credentials_file=str(key))
            result = await call_json(client, spec)
            assert classify(result.outcome) is FailureKind.SUCCESS
            revoked = write_key_file(
                tmp_path / "revoked.json", url + "/token", "sk-sim-revoked@p.iam.gserviceaccount.com"
            )
            refused = await call_json(client, _spec("gemini-2.5-flash", base_url=url, credentials_file=str(revoked)))
            assert refused.outcome.status == 401 and "RefreshError" in refused.outcome.message
        missing = await authorized(_spec("g", credentials_file=str(tmp_path / "nope.json")), tokens)
        assert isinstance(missing, AttemptResult) and "FileNotFoundError" in missing.outcome.message
    finally:
        await runner.cleanup()
