"""The Gemini API family (`gemini`), and the Gemini models of Vertex AI, answering in OpenAI form.

Owns: the request for one target — the OpenAI request translated
(`gemini_wire.to_gemini_request`) and sent as `POST {base_url}/v1beta/models/{model}:generateContent`
(`:streamGenerateContent?alt=sse` for a stream) with the key in `x-goog-api-key` — the reading
of a complete answer (`outcome_of_answer`: a `GenerateContentResponse` becomes an OpenAI
`chat.completion`; a safety block a content-policy failure) and the events of a stream
translated on the fly (`translated_events`). `GeminiChat.endpoint` is the one thing Vertex AI's
Gemini models change (`turnout.adapters.vertex`): the URL under a project and location, and
an OAuth2 access token instead of the key. Sending, time limits and the commit point are
`turnout.adapters.exchange`'s.
Must not import: `turnout.adapters.exchange`, services, FastAPI, arq.

Errors: non-2xx answers are Google's `{"error": {"code", "message", "status", "details"}}`
(`turnout.adapters.google_errors`: the status name kept, `RetryInfo.retryDelay` as the retry
hint, a rejected key as a 401). A safety block — `promptFeedback.blockReason`, or a first
candidate ended by `SAFETY` / `PROHIBITED_CONTENT` / `BLOCKLIST` / ... without content — is a
2xx error envelope of code `content_filter` (CONTENT_POLICY: not retried,
`content_policy_fallbacks` tried when configured), in a stream too when it comes before any
content; after content the stream's finish is `content_filter`. A request Gemini cannot express
(`WireError`) is a 400 `invalid_request_error` without any HTTP call.
Sources: https://ai.google.dev/api/generate-content, https://ai.google.dev/gemini-api/docs/api-key
(`x-goog-api-key`), https://ai.google.dev/gemini-api/docs/troubleshooting.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Final
from urllib.parse import quote

import httpx
import msgspec
from httpx_sse import ServerSentEvent

from turnout.adapters.anthropic_events import StreamError
from turnout.adapters.base import (
    SSE_MEDIA_TYPE,
    AttemptResult,
    CallSpec,
    CountCall,
    NativeFrames,
    Usage,
)
from turnout.adapters.chat_parts import WireError
from turnout.adapters.commit import DONE
from turnout.adapters.gemini_events import GeminiChunks, StreamBlocked
from turnout.adapters.gemini_wire import blocked, is_answer, openai_usage, to_gemini_request, to_openai_completion
from turnout.adapters.google_errors import google_error_fields, google_error_outcome
from turnout.adapters.prepared import post_request
from turnout.adapters.sse import event_batches, object_data
from turnout.adapters.translated import FILTERED, TranslatingChat, content_policy_failure, error_event
from turnout.core.native import CHAT
from turnout.core.types import Outcome, TransportError

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()


def model_path(prefix: str, model: str, *, stream: bool) -> str:
    """`{prefix}/models/{model}:generateContent`, or `:streamGenerateContent?alt=sse` (pure).

    Args:
        prefix: `/v1beta` (the Gemini API) or Vertex AI's `/v1/projects/{p}/locations/{l}/publishers/google`.
        model: the offer's model (`gemini-2.5-flash`), percent-encoded but for `A-Z a-z 0-9 - . _ ~`.
    """
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"{prefix}/models/{quote(model, safe='')}:{method}"


def count_tokens_call(model: str, request: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(path under the provider's `base_url`, body) of the Gemini API's token count of an OpenAI
    chat `request` for `model`: `POST /v1beta/models/{model}:countTokens` with
    `{"generateContentRequest": {"model": "models/{model}", ...the translated request}}`, answered
    `{"totalTokens": N}` (https://ai.google.dev/api/tokens). Pure.

    Raises:
        WireError: the request cannot be expressed in Gemini's API.
    """
    translated = to_gemini_request(request)
    translated.pop("generationConfig", None)  # counting reads the input only
    path = f"/v1beta/models/{quote(model, safe='')}:countTokens"
    return path, {"generateContentRequest": {"model": f"models/{model}", **translated}}


def json_request(
    client: httpx.AsyncClient, spec: CallSpec, path: str, credential: tuple[str, str], body: Any, *, stream: bool
) -> httpx.Request:
    """`POST {spec.base_url}{path}` of `body` (JSON-encoded) with the `credential` header (never
    logged or echoed), Turnout's request id in `x-request-id`, and `accept: text/event-stream`
    for a stream."""
    headers = [credential, ("content-type", "application/json"), ("x-request-id", spec.request_id)]
    if stream:
        headers.append(("accept", "text/event-stream"))
    return post_request(client, spec.base_url, path, headers, _encode.encode(body))


def read_google_body(
    status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float, *, what: str, shape: Callable[[Any], bool]
) -> tuple[AttemptResult | None, Any]:
    """(failure, None) of a complete Google answer that is no success — an error status
    (`google_error_outcome`), a 2xx Google error body (`error_in_body`), a 2xx body that `shape`
    refuses (PROTOCOL, the message naming `what` it is not) — else (None, the decoded body). Pure."""
    if not 200 <= status < 300:
        return google_error_outcome(status, headers, content, now_epoch_s), None
    try:
        data: Any = _decode.decode(content) if content else None
    except msgspec.DecodeError:
        data = None
    error = google_error_fields(data)
    if error is not None:
        outcome = Outcome(status=status, error_type=error[0], error_code=error[0], message=error[1], error_in_body=True)
        return AttemptResult(outcome=outcome), None
    if not shape(data):
        message = f"upstream answered 2xx with a body that is not {what}"
        return AttemptResult(outcome=Outcome(status=status, transport=TransportError.PROTOCOL, message=message)), None
    return None, data


def outcome_of_answer(status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float) -> AttemptResult:
    """An `AttemptResult` for a complete `generateContent` answer (pure).

    A 2xx `GenerateContentResponse` is translated to an OpenAI `chat.completion`, or is a
    content-policy failure when blocked (`translated.content_policy_failure`); a 2xx Google error body is
    `error_in_body`; any other 2xx body is PROTOCOL. Error statuses: `google_error_outcome`.
    Usage from `usageMetadata` (`gemini_wire.openai_usage`).
    """
    failure, data = read_google_body(
        status, headers, content, now_epoch_s, what="a GenerateContentResponse", shape=is_answer
    )
    if failure is not None:
        return failure
    usage = openai_usage(data.get("usageMetadata"))
    tokens = Usage(input_tokens=usage["prompt_tokens"], output_tokens=usage["completion_tokens"])
    reason = blocked(data)
    if reason is not None:
        return content_policy_failure(status, reason, tokens)
    body = to_openai_completion(data, model="", created_s=int(now_epoch_s))
    return AttemptResult(outcome=Outcome(status=status), body=_encode.encode(body), usage=tokens)


async def translated_events(
    raw: AsyncIterator[list[ServerSentEvent]], chunks: GeminiChunks
) -> AsyncIterator[list[ServerSentEvent]]:
    """OpenAI-shaped events for a Gemini event source, one list per list of `raw` that gives any.

    One `data: {chunk}` event per translated chunk, `data: [DONE]` after the finish (then
    ends), an `error` event `{"error": {"type", "code", "message"}}` for an error object (its
    status name as type and code) or a safety block before content (type
    `invalid_request_error`, code `content_filter`), then ends; malformed or non-object data
    unchanged (the consumer decides). Transport exceptions of `raw` propagate.
    """
    async for batch in raw:
        out: list[ServerSentEvent] = []
        for sse in batch:
            if not sse.data.strip():
                continue
            data = object_data(sse)
            if data is None:
                out.append(sse)  # malformed: the consumer decides
                continue
            try:
                translated, done = chunks.feed(data)
            except StreamError as exc:
                out.append(error_event(exc.error_type, exc.message, exc.error_type))
                yield out
                return
            except StreamBlocked as exc:
                out.append(error_event("invalid_request_error", str(exc), FILTERED))
                yield out
                return
            out.extend(ServerSentEvent(data=_encode.encode(chunk).decode()) for chunk in translated)
            if done:
                out.append(ServerSentEvent(data=DONE))
                yield out
                return
        if out:
            yield out


class GeminiChat(TranslatingChat):
    """The `ApiFamily` of the Gemini API's `generateContent` (the `gemini` kind): what it refuses
    is what `to_gemini_request` refuses (`n` > 1, an image URL that is not a data URL, a part or
    role Gemini has no form for; `TranslatingChat`)."""

    stream_end = "finishReason"
    native_surface = CHAT
    stream_media_type: Final = SSE_MEDIA_TYPE

    def endpoint(self, spec: CallSpec, *, stream: bool) -> tuple[str, tuple[str, str]]:
        """(path under `spec.base_url`, credential header) of one call: the Gemini API's
        `/v1beta/models/{model}:...` with the key in `x-goog-api-key`."""
        return model_path("/v1beta", spec.target.model, stream=stream), ("x-goog-api-key", spec.api_key)

    def translate(self, request: dict[str, Any]) -> dict[str, Any]:
        """`to_gemini_request`."""
        return to_gemini_request(request)

    def send_translated(
        self, client: httpx.AsyncClient, spec: CallSpec, translated: dict[str, Any], *, stream: bool
    ) -> httpx.Request | AttemptResult:
        """`POST` of `translated` at `endpoint`; the credential is never logged or echoed;
        Turnout's request id goes in `x-request-id`."""
        path, credential = self.endpoint(spec, stream=stream)
        return json_request(client, spec, path, credential, translated, stream=stream)

    def count_request(
        self, client: httpx.AsyncClient, spec: CallSpec, messages: dict[str, Any], request: dict[str, Any] | None
    ) -> CountCall:
        """`POST .../models/{model}:countTokens` (`count_tokens_call`: the chat form's counted
        fields), the key in `x-goog-api-key`, answered `{"totalTokens": N}`; see `TokenCounting`."""
        if request is None:
            raise WireError("the request has no chat form to count", "messages")
        path, payload = count_tokens_call(spec.target.model, request)
        return json_request(client, spec, path, ("x-goog-api-key", spec.api_key), payload, stream=False), "totalTokens"

    def read_outcome(
        self, status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float, *, native: bool = False
    ) -> AttemptResult:
        """See `outcome_of_answer`."""
        return outcome_of_answer(status, headers, content, now_epoch_s)

    def stream_events(
        self, response: httpx.Response, native: NativeFrames | None = None
    ) -> AsyncIterator[list[ServerSentEvent]]:
        """The response's events translated to OpenAI chunks (`translated_events`), one list per read."""
        return translated_events(event_batches(response), GeminiChunks(created_s=int(time.time())))


GEMINI_CHAT: Final = GeminiChat()
"""The family of `gemini` providers."""
