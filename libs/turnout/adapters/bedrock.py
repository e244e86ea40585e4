"""The Amazon Bedrock family (`bedrock`): the Converse and ConverseStream APIs, answering in OpenAI form.

Owns: the request for one target — the target's OpenAI request translated
(`bedrock_wire.to_converse_request`), sent as `POST {base_url}/model/{modelId}/converse`
(`/converse-stream` for a stream) and signed with SigV4 for the provider's region
(`turnout.aws.sigv4`) — the reading of a complete answer (`outcome_of_converse`: a Converse
answer becomes an OpenAI `chat.completion`; an error keeps AWS's error type and message),
and a stream's event-stream messages translated into OpenAI chunk events
(`translated_events`). One family for every model Bedrock serves: Converse is the same for
all of them. Sending, time limits and the commit point are `turnout.adapters.exchange`'s.
Must not import: `turnout.adapters.exchange`, services, FastAPI, arq.

Errors (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html#API_runtime_Converse_Errors):
the type is the `x-amzn-ErrorType` header's name (`ThrottlingException:http://...` ->
`ThrottlingException`; else the body's `__type`), the message the body's `message`; both are
kept in the outcome, which `turnout.core.classify` reads: `ThrottlingException` (429) and
`ModelNotReadyException` (429) rate limits, `ServiceUnavailableException` (503) and
`InternalServerException` (500) server errors, `ModelTimeoutException` (408) a timeout,
`ValidationException` (400) a client error or, worded "Input is too long" / "too many input
tokens", a context-window failure, `AccessDeniedException` / `UnrecognizedClientException`
(403) an auth failure, `ResourceNotFoundException` (404) a client error,
`ServiceQuotaExceededException` quota. A 2xx answer whose `stopReason` is
`guardrail_intervened` or `content_filtered` is a content-policy failure (a 2xx envelope of
code `content_filter`, as Azure's filter: not retried, `content_policy_fallbacks` tried). A
stream's exception message (`throttlingException`, `modelStreamErrorException`, ...) is an
`error` event, classified by its type: a failed attempt before the commit point, the relay's
final error event after it. A streamed answer a guardrail ends is relayed as sent, its last
chunk's `finish_reason` `content_filter`.

Credentials: the call's key (`CallSpec.api_key`, `turnout.aws.keys.join_key`'s form; a tenant's
own Bedrock keys come the same way), or botocore's default chain when the provider has none.
No credentials, or a key of another form, is a 401-like failure without an HTTP call.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, Final

import httpx
import msgspec
from httpx_sse import ServerSentEvent

from turnout.adapters.anthropic_events import StreamError
from turnout.adapters.base import (
    AttemptResult,
    CallSpec,
    CountCall,
    NativeFrames,
    Usage,
    endpoint_url,
)
from turnout.adapters.bedrock_events import EVENT_STREAM, EventTranslator, frames
from turnout.adapters.bedrock_wire import (
    POLICY_STOPS,
    answer_content,
    converse_path,
    to_converse_request,
    to_openai_completion,
)
from turnout.adapters.chat_parts import WireError
from turnout.adapters.commit import DONE
from turnout.adapters.prepared import post_request
from turnout.adapters.translated import TranslatingChat, content_policy_failure, error_event
from turnout.aws.sigv4 import NoAwsCredentials, credentials_for, signed_headers
from turnout.core.hints import retry_after_s
from turnout.core.types import Outcome, TransportError

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()

SURFACE: Final = "converse"
"""The family's own surface: no client speaks it, so every call is translated."""
POLICY_MESSAGE: Final = "The response was blocked by the provider's content policy (Bedrock stopReason {reason})."
"""The message of an answer a guardrail or the model's filter ended (AWS sends none)."""


def aws_error(headers: httpx.Headers, data: Any) -> tuple[str | None, str]:
    """(AWS error type, message) of an error answer (pure): the type from `x-amzn-ErrorType`
    (its part before `:`), else the body's `__type` (its part after `#`); the message from the
    body's `message` (or `Message`)."""
    raw = headers.get("x-amzn-errortype") or ""
    etype = raw.split(":", 1)[0].strip() or None
    body = data if isinstance(data, dict) else {}
    if etype is None and isinstance(body.get("__type"), str):
        etype = body["__type"].rsplit("#", 1)[-1] or None
    message = body.get("message", body.get("Message", ""))
    return etype, message if isinstance(message, str) else str(message)


def outcome_of_converse(
    status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float, *, model: str = ""
) -> AttemptResult:
    """An `AttemptResult` for a complete Converse answer (pure).

    A 2xx Converse answer becomes an OpenAI `chat.completion` body (its `id` the
    `x-amzn-RequestId`, its `model` `model`); one whose `stopReason` is a policy stop
    (`bedrock_wire.POLICY_STOPS`) is a content-policy failure; any other 2xx is PROTOCOL.
    An error status keeps AWS's type (`aws_error`), message and retry hint.

    Args:
        status: HTTP status.
        headers: response headers.
        content: the body.
        now_epoch_s: current time, epoch seconds (`created`, hint dates).
        model: the target's model id, named in the completion.
    """
    try:
        data: Any = _decode.decode(content) if content else None
    except msgspec.DecodeError:
        data = None
    if not 200 <= status < 300:
        etype, message = aws_error(headers, data)
        if not message and content and data is None:
            message = content[:300].decode("utf-8", "replace")
        hint = retry_after_s(headers, status=status, message=message, now_epoch_s=now_epoch_s)
        return AttemptResult(outcome=Outcome(status=status, error_type=etype, message=message, retry_after_s=hint))
    blocks = answer_content(data)
    if blocks is None:
        message = "upstream answered 2xx with a body that is not a Converse answer"
        return AttemptResult(outcome=Outcome(status=status, transport=TransportError.PROTOCOL, message=message))
    body = to_openai_completion(
        data, blocks, answer_id=headers.get("x-amzn-requestid", ""), model=model, created_s=int(now_epoch_s)
    )
    tokens = Usage(input_tokens=body["usage"]["prompt_tokens"], output_tokens=body["usage"]["completion_tokens"])
    if data.get("stopReason") in POLICY_STOPS:
        return content_policy_failure(status, POLICY_MESSAGE.format(reason=data["stopReason"]), tokens)
    return AttemptResult(outcome=Outcome(status=status), body=_encode.encode(body), usage=tokens)


def _event(chunk: dict[str, Any]) -> ServerSentEvent:
    return ServerSentEvent(data=_encode.encode(chunk).decode())


async def translated_events(
    response: httpx.Response, translator: EventTranslator
) -> AsyncIterator[list[ServerSentEvent]]:
    """OpenAI-shaped events of a ConverseStream answer, one list per read that gave any.

    One `data: {chunk}` event per translated chunk; `data: [DONE]` after `metadata` (then
    ends) or at the end of a body that had its `messageStop`; an `error` event carrying
    `{"error": {"type", "message"}}` for an exception message (then ends). A body that ends
    before `messageStop` just ends (the commit point or the relay names the cut). botocore's
    `ParserError` for a broken frame and the transport's exceptions propagate.
    """
    async for batch in frames(response.aiter_bytes()):
        out: list[ServerSentEvent] = []
        for frame in batch:
            try:
                chunks = translator.feed(frame)
            except StreamError as exc:
                out.append(error_event(exc.error_type, exc.message))
                yield out
                return
            out.extend(_event(chunk) for chunk in chunks)
            if translator.done:
                out.append(ServerSentEvent(data=DONE))
                yield out
                return
        if out:
            yield out
    if translator.finished:
        yield [ServerSentEvent(data=DONE)]


def _no_credentials(reason: str) -> AttemptResult:
    """A call that cannot be signed: a 401-like failure (AUTH) without an HTTP call."""
    return AttemptResult(
        outcome=Outcome(status=401, error_type="UnrecognizedClientException", message=f"cannot sign the call: {reason}")
    )


def signed_request(
    client: httpx.AsyncClient, spec: CallSpec, path: str, body: bytes, *, accept: str = "application/json"
) -> httpx.Request | AttemptResult:
    """`POST {spec.base_url}{path}` of `body` signed with SigV4 for `spec.region` with the call's
    credentials (`credentials_for(spec.api_key)`), or a 401-like failure without a call when there
    are none. Signed headers: `content-type`, `accept`, `host`, `x-amz-date` (and
    `x-amz-security-token`); the request id goes in `x-request-id` (unsigned)."""
    try:
        credentials = credentials_for(spec.api_key)
    except (NoAwsCredentials, ValueError) as exc:
        return _no_credentials(str(exc))
    url = str(endpoint_url(spec.base_url, path))
    unsigned = [("content-type", "application/json"), ("accept", accept)]
    headers = signed_headers(url, body, unsigned, credentials, spec.region or "")
    return post_request(client, spec.base_url, path, [*headers, ("x-request-id", spec.request_id)], body)


COUNTED_FIELDS: Final = ("messages", "system", "toolConfig", "additionalModelRequestFields")
"""The Converse request fields `CountTokens` reads (its `ConverseTokensRequest`)."""


def count_tokens_call(model: str, request: dict[str, Any]) -> tuple[str, bytes]:
    """(path under the provider's `base_url`, JSON body) of Bedrock's `CountTokens` of an OpenAI
    chat `request` for `model`: `POST /model/{modelId}/count-tokens` (the id encoded as
    `converse_path` encodes it) with `{"input": {"converse": {...}}}`, the Converse request's
    `COUNTED_FIELDS`; answered `{"inputTokens": N}`. Sent signed (`signed_request`). Pure.
    Source: https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_CountTokens.html.

    Raises:
        WireError: the request cannot be expressed in Converse.
    """
    translated = to_converse_request(request)
    converse = {k: translated[k] for k in COUNTED_FIELDS if k in translated}
    path = converse_path(model, stream=False).removesuffix("/converse") + "/count-tokens"
    return path, _encode.encode({"input": {"converse": converse}})


class BedrockConverse(TranslatingChat):
    """The `ApiFamily` of Amazon Bedrock's Converse / ConverseStream APIs: what it refuses is what
    `to_converse_request` refuses (`TranslatingChat`)."""

    stream_end: Final = "messageStop"
    native_surface = SURFACE
    stream_media_type: Final = EVENT_STREAM

    def translate(self, request: dict[str, Any]) -> dict[str, Any]:
        """`to_converse_request`."""
        return to_converse_request(request)

    def send_translated(
        self, client: httpx.AsyncClient, spec: CallSpec, translated: dict[str, Any], *, stream: bool
    ) -> httpx.Request | AttemptResult:
        """`POST {base_url}/model/{modelId}/converse[-stream]` (`signed_request`); a call without
        credentials is a 401-like failure without a call."""
        accept = EVENT_STREAM if stream else "application/json"
        path = converse_path(spec.target.model, stream=stream)
        return signed_request(client, spec, path, _encode.encode(translated), accept=accept)

    def count_request(
        self, client: httpx.AsyncClient, spec: CallSpec, messages: dict[str, Any], request: dict[str, Any] | None
    ) -> CountCall:
        """`POST {base_url}/model/{modelId}/count-tokens` (`count_tokens_call`: the Converse fields
        of the chat form), SigV4-signed, answered `{"inputTokens": N}`; see `TokenCounting`."""
        if request is None:
            raise WireError("the request has no chat form to count", "messages")
        path, raw = count_tokens_call(spec.target.model, request)
        return signed_request(client, spec, path, raw), "inputTokens"

    def read_outcome(
        self, status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float, *, native: bool = False
    ) -> AttemptResult:
        """See `outcome_of_converse` (never native)."""
        return outcome_of_converse(status, headers, content, now_epoch_s)

    def stream_events(
        self, response: httpx.Response, native: NativeFrames | None = None
    ) -> AsyncIterator[list[ServerSentEvent]]:
        """The answer's event-stream messages translated to OpenAI chunks (`translated_events`)."""
        translator = EventTranslator(
            answer_id=response.headers.get("x-amzn-requestid", ""), model="", created_s=int(time.time())
        )
        return translated_events(response, translator)


BEDROCK_CONVERSE: Final = BedrockConverse()
"""The family of `bedrock` providers."""
