"""OpenAI-compatible Chat Completions upstream, streaming (SSE), up to the commit point.

Owns: opening an upstream stream and reading it until its first
content-bearing chunk (the commit point, SPEC §8). Everything before that —
an error status, a connection failure, an error envelope or `error` event in
the first frames, malformed data, the first-token timeout — is an ordinary
failed attempt (an `Outcome`), so the loop may retry or fall back and the
client never sees it. At the commit point the open stream and the frames
held so far are handed over (`UpstreamStream`) for the relay.
Must not import: services, FastAPI, arq.

Wire format: https://platform.openai.com/docs/api-reference/chat-streaming
(`data: {chunk}` events, `data: [DONE]`).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
from httpx_sse import EventSource, ServerSentEvent

from turnout.adapters.exchange import post_request, send_stream
from turnout.adapters.openai_chat import AttemptResult, _error_fields, outcome_of_response
from turnout.core.hints import retry_after_s
from turnout.core.types import Outcome, TransportError

_decode = msgspec.json.Decoder()
DONE = "[DONE]"


class UpstreamStream:
    """An upstream stream past its commit point.

    Attributes:
        held: data payloads (JSON text) read before the commit, in order,
            including the first content chunk; the relay sends them first.
        done: the stream already ended cleanly (`[DONE]`, or a finish with
            no content: an empty completion).
        events: the rest of the stream's events.
    """

    def __init__(
        self, response: httpx.Response, events: AsyncIterator[ServerSentEvent], held: list[str], done: bool
    ) -> None:
        self._response = response
        self.events = events
        self.held = held
        self.done = done

    async def aclose(self) -> None:
        """Close the upstream response (and its connection if unfinished)."""
        await self._response.aclose()


def is_content(chunk: dict[str, Any]) -> bool:
    """True when a chunk carries content: text, refusal, tool calls, or a finish.

    Role-only deltas, empty content and usage-only chunks are not content.
    """
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        return False
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        if choice.get("finish_reason"):
            return True
        delta = choice.get("delta")
        if isinstance(delta, dict) and any(delta.get(k) for k in ("content", "refusal", "tool_calls", "function_call")):
            return True
    return False


def error_outcome(data: dict[str, Any], headers: httpx.Headers) -> Outcome:
    """The outcome of an error envelope found inside a 200 stream (SPEC §3)."""
    etype, code, message = _error_fields(data)
    hint = retry_after_s(headers, status=None, message=message, now_epoch_s=time.time())
    return Outcome(status=200, error_type=etype, error_code=code, message=message, retry_after_s=hint,
                   error_in_body=True)


async def _until_commit(response: httpx.Response) -> AttemptResult:
    events = EventSource(response).aiter_sse().__aiter__()
    held: list[str] = []
    while True:
        try:
            sse = await events.__anext__()
        except StopAsyncIteration:
            return AttemptResult(outcome=Outcome(
                transport=TransportError.RESET, message="upstream stream ended before any content or [DONE]",
            ))
        data = sse.data
        if data.strip() == DONE:
            return AttemptResult(outcome=Outcome(status=200), stream=UpstreamStream(response, events, held, True))
        if not data.strip():
            continue  # comments and keep-alives
        try:
            chunk = _decode.decode(data)
        except msgspec.DecodeError:
            return AttemptResult(outcome=Outcome(
                status=200, transport=TransportError.PROTOCOL, message="malformed SSE data before the first content",
            ))
        if not isinstance(chunk, dict):
            return AttemptResult(outcome=Outcome(
                status=200, transport=TransportError.PROTOCOL, message="SSE data is not a JSON object",
            ))
        if sse.event == "error" or chunk.get("error"):
            return AttemptResult(outcome=error_outcome(chunk, response.headers))
        held.append(data)
        if is_content(chunk):
            return AttemptResult(outcome=Outcome(status=200), stream=UpstreamStream(response, events, held, False))


async def open_stream(
    client: httpx.AsyncClient,
    *,
    base_url: str,
    api_key: str,
    body: bytes,
    timeout_s: float,
    ttft_timeout_s: float | None,
    request_id: str,
) -> AttemptResult:
    """One streaming attempt up to its commit point (SPEC §8).

    Args:
        client: the process's shared client.
        base_url: the provider's API root.
        api_key: the credential (never logged or echoed).
        body: the JSON body for this target, with `stream: true`.
        timeout_s: the attempt's limit until the first content, seconds.
        ttft_timeout_s: the first-token limit, seconds (None: `timeout_s` only);
            hitting it is a FIRST_TOKEN_TIMEOUT (fallback-now).
        request_id: Turnout's request id, sent as `x-request-id`.

    Returns:
        An `AttemptResult` whose `stream` is set when committed; never raises
        for upstream trouble. Cancellation propagates (the response is closed).
    """
    request = post_request(
        client, base_url.rstrip("/") + "/chat/completions", content=body,
        headers={"authorization": f"Bearer {api_key}", "content-type": "application/json",
                 "accept": "text/event-stream", "x-request-id": request_id},
    )
    if isinstance(request, AttemptResult):
        return request
    return await send_stream(
        client, request, timeout_s=timeout_s, ttft_timeout_s=ttft_timeout_s,
        read=outcome_of_response, until_commit=_until_commit,
    )
