"""Anthropic Messages upstream, streaming (SSE), up to the commit point.

Owns: opening an Anthropic stream, translating its named events into
OpenAI `chat.completion.chunk` data on the fly (`translated_events`), and
reading it until the first content (the commit point, SPEC §8): the first
text or tool delta, or a finish. Before that, an error status, a connection
failure, an `error` event (classified by its type: `overloaded_error` like
a 529, `rate_limit_error` like a 429, `api_error` like a 500), malformed
data or the first-token timeout is an ordinary failed attempt. At the
commit point the open stream is handed over as an `UpstreamStream` whose
`held` frames and `events` are already OpenAI-shaped, so the relay never
sees Anthropic's format; an `error` event after content reaches the relay
as an `error` event and ends the stream with a final error frame.
Must not import: services, FastAPI, arq.

Source: https://docs.anthropic.com/en/docs/build-with-claude/streaming.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import httpx
import msgspec
from httpx_sse import EventSource, ServerSentEvent

from turnout.adapters.anthropic_chat import messages_request, outcome_of_message, untranslatable
from turnout.adapters.anthropic_events import DONE as ANTHROPIC_DONE
from turnout.adapters.anthropic_events import ChunkTranslator, StreamError
from turnout.adapters.anthropic_wire import WireError
from turnout.adapters.exchange import send_stream
from turnout.adapters.base import AttemptResult, UpstreamStream
from turnout.adapters.openai_stream import DONE, error_outcome, is_content
from turnout.core.types import Outcome, TransportError

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()


async def translated_events(
    raw: AsyncIterator[ServerSentEvent], translator: ChunkTranslator
) -> AsyncIterator[ServerSentEvent]:
    """OpenAI-shaped events for an Anthropic event source.

    Yields one `data: {chunk}` event per translated chunk, `data: [DONE]`
    after `message_stop` (then ends), an `error` event carrying
    `{"error": {"type", "message"}}` for an Anthropic `error` event (then
    ends), and malformed or non-object data unchanged (the consumer decides).
    Transport exceptions of `raw` propagate.
    """
    async for sse in raw:
        if not sse.data.strip():
            continue
        try:
            data = _decode.decode(sse.data)
        except msgspec.DecodeError:
            yield sse
            continue
        if not isinstance(data, dict):
            yield sse
            continue
        try:
            chunks = translator.feed(sse.event, data)
        except StreamError as exc:
            error = {"error": {"type": exc.error_type, "message": exc.message}}
            yield ServerSentEvent(event="error", data=_encode.encode(error).decode())
            return
        if chunks == ANTHROPIC_DONE:
            yield ServerSentEvent(data=DONE)
            return
        for chunk in chunks:
            yield ServerSentEvent(data=_encode.encode(chunk).decode())


async def _until_commit(response: httpx.Response, events: AsyncIterator[ServerSentEvent]) -> AttemptResult:
    held: list[str] = []
    while True:
        try:
            sse = await events.__anext__()
        except StopAsyncIteration:
            return AttemptResult(outcome=Outcome(
                transport=TransportError.RESET, message="upstream stream ended before any content or message_stop",
            ))
        if sse.data == DONE:
            return AttemptResult(outcome=Outcome(status=200), stream=UpstreamStream(response, events, held, True))
        try:
            chunk = _decode.decode(sse.data)
        except msgspec.DecodeError:
            return AttemptResult(outcome=Outcome(
                status=200, transport=TransportError.PROTOCOL, message="malformed SSE data before the first content",
            ))
        if not isinstance(chunk, dict):
            return AttemptResult(outcome=Outcome(
                status=200, transport=TransportError.PROTOCOL, message="SSE data is not a JSON object",
            ))
        if sse.event == "error":
            return AttemptResult(outcome=error_outcome(chunk, response.headers))
        held.append(sse.data)
        if is_content(chunk):
            return AttemptResult(outcome=Outcome(status=200), stream=UpstreamStream(response, events, held, False))


async def open_messages_stream(
    client: httpx.AsyncClient,
    *,
    base_url: str,
    api_key: str,
    body: bytes,
    timeout_s: float,
    ttft_timeout_s: float | None,
    request_id: str,
) -> AttemptResult:
    """One streaming attempt on an Anthropic provider up to its commit point (SPEC §8).

    Args:
        client: the process's shared client.
        base_url: the provider's root without `/v1`.
        api_key: the credential, sent as `x-api-key` (never logged or echoed).
        body: the target's request body in OpenAI form, with `stream: true`.
        timeout_s: the attempt's limit until the first content, seconds.
        ttft_timeout_s: the first-token limit, seconds (None: `timeout_s`
            only); hitting it is a FIRST_TOKEN_TIMEOUT (fallback-now).
        request_id: Turnout's request id, sent as `x-request-id`.

    Returns:
        An `AttemptResult` whose `stream` (OpenAI-shaped) is set when
        committed; never raises for upstream trouble. Cancellation
        propagates (the response is closed).
    """
    try:
        request = messages_request(
            client, base_url=base_url, api_key=api_key, body=body, request_id=request_id, stream=True
        )
    except WireError as exc:
        return untranslatable(exc)

    async def until_commit(response: httpx.Response) -> AttemptResult:
        translator = ChunkTranslator(created_s=int(time.time()))
        events = translated_events(EventSource(response).aiter_sse(), translator).__aiter__()
        return await _until_commit(response, events)

    return await send_stream(
        client, request, timeout_s=timeout_s, ttft_timeout_s=ttft_timeout_s,
        read=outcome_of_message, until_commit=until_commit,
    )
