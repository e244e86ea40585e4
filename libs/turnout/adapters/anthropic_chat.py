"""The Anthropic Messages API family (`anthropic`), answering in OpenAI form.

Owns: the request for one target — the target's OpenAI request body
translated (`anthropic_wire.to_anthropic_request`) and sent as
`POST {base_url}/v1/messages` with `x-api-key` and `anthropic-version` —
the reading of a complete answer (`outcome_of_message`: a `message` becomes
an OpenAI `chat.completion` body), and the events of a stream translated on
the fly into OpenAI `chat.completion.chunk` data (`translated_events`), so
that everything downstream stays OpenAI-shaped. A native call (the client
spoke the Messages API: `CallSpec.native`, SPEC §13) sends the client's body
(`turnout.core.native.native_body`) with its `anthropic-version` and
`anthropic-beta` (`anthropic_wire.upstream_headers`); its complete answer is
the provider's `message` as is (`shape` `messages`), and its stream events are
gathered as sent (`NativeFrames`) beside their translation, which still finds
the commit point, usage, the finish and errors. Sending, time limits and
the commit point are `turnout.adapters.exchange`'s.
Must not import: `turnout.adapters.exchange`, services, FastAPI, arq.

Errors: Anthropic bodies `{"type": "error", "error": {"type", "message"}}`
are read by `base.error_fields` (error statuses by `base.error_status_outcome`,
2xx envelopes by `base.envelope_outcome`); their statuses (400, 401, 402,
403, 404, 413, 429, 500, 529, ...) and types are classified by
`turnout.core.classify` (which knows Anthropic's types); `retry-after` and
`anthropic-ratelimit-*-reset` hints by `turnout.core.hints`. A request that
Anthropic cannot express (`WireError`) is a 400 `invalid_request_error`
outcome without any HTTP call (terminal: SPEC §3 "400 ... terminal"). An
`error` event of a stream (`overloaded_error` like a 529, `rate_limit_error`
like a 429, `api_error` like a 500) becomes an `error` event carrying
`{"error": {"type", "message"}}`: a failed attempt before the commit point,
a final error frame of the relay after it.
Sources: https://docs.anthropic.com/en/api/messages, /en/api/errors,
/en/docs/build-with-claude/streaming.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, Final

import httpx
import msgspec
from httpx_sse import ServerSentEvent

from turnout.adapters.anthropic_events import DONE as ANTHROPIC_DONE
from turnout.adapters.anthropic_events import ChunkTranslator, StreamError
from turnout.adapters.anthropic_wire import (
    ANTHROPIC_VERSION,
    COUNT_PATH,
    MESSAGES_PATH,
    count_tokens_body,
    is_message,
    openai_usage,
    to_anthropic_request,
    to_openai_completion,
    upstream_headers,
)
from turnout.adapters.base import (
    SSE_MEDIA_TYPE,
    AttemptResult,
    CallSpec,
    CountCall,
    NativeFrames,
    Refusal,
    Usage,
    crossing_refusal,
    envelope_outcome,
    error_status_outcome,
)
from turnout.adapters.chat_parts import WireError
from turnout.adapters.commit import DONE
from turnout.adapters.prepared import post_request
from turnout.adapters.sse import event_batches
from turnout.adapters.translated import untranslatable
from turnout.core.native import MESSAGES, Native
from turnout.core.types import Outcome, TransportError

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()

END_FRAME: Final = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
"""The event that ends a Messages stream."""


def error_event(message: str, code: str, error_type: str | None = None) -> bytes:
    """The final `error` event of a broken native stream: the provider's error type when it
    sent one, else `timeout_error` for a stall (`stream_stalled`) and `api_error` otherwise
    (the types the ingress gives a translated stream's end, `turnout_ingress.surfaces.messages.events`)."""
    etype = error_type or ("timeout_error" if code == "stream_stalled" else "api_error")
    data = {"type": "error", "error": {"type": etype, "message": message}}
    return b"event: error\ndata: " + _encode.encode(data) + b"\n\n"


def messages_request(
    client: httpx.AsyncClient, *, base_url: str, api_key: str, body: bytes, request_id: str, stream: bool
) -> httpx.Request:
    """The HTTP request for an OpenAI-format `body` sent to an Anthropic provider.

    Raises:
        WireError: the body cannot be expressed in Anthropic's API.
    """
    try:
        request = _decode.decode(body)
    except msgspec.DecodeError as exc:
        raise WireError("the request body is not valid JSON", "body") from exc
    translated = to_anthropic_request(request, str(request.get("model", "")))
    headers = [
        ("x-api-key", api_key),
        ("anthropic-version", ANTHROPIC_VERSION),
        ("content-type", "application/json"),
        ("x-request-id", request_id),
    ]
    if stream:
        headers.append(("accept", "text/event-stream"))
    return post_request(client, base_url, MESSAGES_PATH, headers, _encode.encode(translated))


def native_request(client: httpx.AsyncClient, spec: CallSpec, native: Native, *, stream: bool) -> httpx.Request:
    """The HTTP request of a native call: `spec.body` (the client's body for this target) as is,
    the target's key in `x-api-key`, the client's `anthropic-version` / `anthropic-beta`
    (`upstream_headers`), Turnout's request id."""
    headers = [
        ("x-api-key", spec.api_key),
        *upstream_headers(native.headers),
        ("content-type", "application/json"),
        ("x-request-id", spec.request_id),
    ]
    if stream:
        headers.append(("accept", "text/event-stream"))
    return post_request(client, spec.base_url, MESSAGES_PATH, headers, spec.body)


def outcome_of_message(
    status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float, *, native: bool = False
) -> AttemptResult:
    """An `AttemptResult` for a complete Anthropic response (pure).

    A 2xx `message` is translated to an OpenAI `chat.completion` body (`native`:
    kept as is, `shape` `messages`); a 2xx error body is `error_in_body`
    (classified by its type, never a success); any other 2xx body is malformed
    (PROTOCOL). Error statuses keep the provider's type and message. Usage is the
    message's, cache reads and writes counted as input (`openai_usage`).

    Args:
        status: HTTP status.
        headers: response headers (rate-limit hints).
        content: the response body.
        now_epoch_s: current time, epoch seconds (hint dates, `created`).
        native: the call was native (`CallSpec.native`).
    """
    if not 200 <= status < 300:
        return error_status_outcome(status, headers, content, now_epoch_s)
    try:
        data: Any = _decode.decode(content) if content else None
    except msgspec.DecodeError:
        data = None
    if isinstance(data, dict) and data.get("type") == "error" or (isinstance(data, dict) and data.get("error")):
        return AttemptResult(outcome=envelope_outcome(status, data, headers, now_epoch_s))
    if not is_message(data):
        return AttemptResult(
            outcome=Outcome(
                status=status,
                transport=TransportError.PROTOCOL,
                message="upstream answered 2xx with a body that is not an Anthropic message",
            )
        )
    usage = openai_usage(data.get("usage"))
    tokens = Usage(input_tokens=usage["prompt_tokens"], output_tokens=usage["completion_tokens"])
    if native:
        return AttemptResult(outcome=Outcome(status=status), body=content, usage=tokens, shape=MESSAGES)
    return AttemptResult(
        outcome=Outcome(status=status),
        body=_encode.encode(to_openai_completion(data, created_s=int(now_epoch_s))),
        usage=tokens,
    )


async def translated_events(
    raw: AsyncIterator[list[ServerSentEvent]], translator: ChunkTranslator, native: NativeFrames | None = None
) -> AsyncIterator[list[ServerSentEvent]]:
    """OpenAI-shaped events for an Anthropic event source, one list per list of `raw`.

    Each list of `raw` (the events of one read) gives one list of the events
    translated from it, in order; a list that translates to nothing (pings,
    block stops) gives none. One `data: {chunk}` event per translated chunk,
    `data: [DONE]` after `message_stop` (then ends), an `error` event
    carrying `{"error": {"type", "message"}}` for an Anthropic `error` event
    (then ends), and malformed or non-object data unchanged (the consumer
    decides). Transport exceptions of `raw` propagate.

    With `native`, every event whose data is a JSON object and not an `error`
    is added to it as sent, before its list is yielded; a list that translates
    to nothing but added events (pings, thinking and signature deltas) gives an
    empty list, so the relay sends them at the pace they came.
    """
    async for batch in raw:
        out: list[ServerSentEvent] = []
        added = False
        for sse in batch:
            if not sse.data.strip():
                continue
            try:
                data = _decode.decode(sse.data)
            except msgspec.DecodeError:
                out.append(sse)
                continue
            if not isinstance(data, dict):
                out.append(sse)
                continue
            try:
                chunks = translator.feed(sse.event, data)
                if native is not None:  # after `feed`: an error event raised and is never added
                    native.add(sse)
                    added = True
            except StreamError as exc:
                error = {"error": {"type": exc.error_type, "message": exc.message}}
                out.append(ServerSentEvent(event="error", data=_encode.encode(error).decode()))
                yield out
                return
            if chunks == ANTHROPIC_DONE:
                out.append(ServerSentEvent(data=DONE))
                yield out
                return
            out.extend(ServerSentEvent(data=_encode.encode(chunk).decode()) for chunk in chunks)
        if out or added:
            yield out


class AnthropicMessages:
    """The `ApiFamily` of the Anthropic Messages API."""

    stream_end: Final = "message_stop"
    stream_media_type: Final = SSE_MEDIA_TYPE
    native_surface: Final = MESSAGES

    def refusal(self, request: dict[str, Any], model: str, native: Native | None = None) -> Refusal | None:
        """What `to_anthropic_request` refuses of `request` (`n` > 1, a role or content part
        Anthropic has no form for), or None; see `ApiFamily`. Translates the request once more
        than the call itself does: a few microseconds, for Anthropic targets only. A request that
        came on the Messages surface is sent as it came: never refused."""
        if native is not None and native.surface == MESSAGES:
            return None
        crossing = crossing_refusal(native, MESSAGES)
        if crossing is not None:
            return crossing
        try:
            to_anthropic_request(request, model)
        except WireError as exc:
            return Refusal(exc.message, exc.param)
        return None

    def build_request(
        self, client: httpx.AsyncClient, spec: CallSpec, *, stream: bool
    ) -> httpx.Request | AttemptResult:
        """`POST {base_url}/v1/messages` (`messages_request`; a native call: `native_request`),
        or a 400 without a call for a body Anthropic cannot express (the router skips such a
        target first: `refusal`); see `ApiFamily`."""
        if spec.native is not None:
            return native_request(client, spec, spec.native, stream=stream)
        try:
            return messages_request(
                client,
                base_url=spec.base_url,
                api_key=spec.api_key,
                body=spec.body,
                request_id=spec.request_id,
                stream=stream,
            )
        except WireError as exc:
            return untranslatable(exc)

    def count_request(
        self, client: httpx.AsyncClient, spec: CallSpec, messages: dict[str, Any], request: dict[str, Any] | None
    ) -> CountCall:
        """`POST {base_url}/v1/messages/count_tokens` (`count_tokens_body`, the target's model),
        the key in `x-api-key`, answered `{"input_tokens": N}`; see `TokenCounting`."""
        headers = [("x-api-key", spec.api_key), ("anthropic-version", ANTHROPIC_VERSION)]
        body = _encode.encode(count_tokens_body(messages, spec.target.model))
        built = post_request(client, spec.base_url, COUNT_PATH, [*headers, ("content-type", "application/json")], body)
        return built, "input_tokens"

    def native_frames(self) -> NativeFrames:
        """A gatherer ending with `message_stop`, breaking with an `error` event (`error_event`)."""
        return NativeFrames(end_frame=END_FRAME, error_frame=error_event)

    def read_outcome(
        self, status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float, *, native: bool = False
    ) -> AttemptResult:
        """See `outcome_of_message`."""
        return outcome_of_message(status, headers, content, now_epoch_s, native=native)

    def stream_events(
        self, response: httpx.Response, native: NativeFrames | None = None
    ) -> AsyncIterator[list[ServerSentEvent]]:
        """The response's events translated to OpenAI chunks (`translated_events`), one list per read;
        with `native`, gathered as sent too."""
        translator = ChunkTranslator(created_s=int(time.time()))
        return translated_events(event_batches(response), translator, native)


ANTHROPIC_MESSAGES: Final = AnthropicMessages()
"""The family of `anthropic` providers."""
