"""The OpenAI Responses API family: `api: responses` offers of `openai` / `openai_compatible` providers.

Owns: the request of a native call (`POST {base_url}/responses`, a Bearer key, the client's
body for this target as is — `turnout.core.native.native_body` plus the ingress's rewrite of
`previous_response_id` and `store` — and its `openai-beta` header), the reading of a complete
answer (`outcome_of_response_object`: the provider's Response object kept as is, `shape`
`responses`), and the events of a stream: relayed as sent (`NativeFrames`) while their
translation into chat chunks (`turnout.adapters.responses_chunks`) finds the commit point,
the finish, the usage and errors. Such an offer serves only requests that came on
`/v1/responses` (`refusal`): nothing else is translated into the Responses API.
Must not import: `turnout.adapters.exchange`, services, FastAPI, arq.

Errors: OpenAI's error body `{"error": {"message", "type", "param", "code"}}` on an error
status (`base.error_status_outcome`); a 2xx Response whose `status` is `failed` is an error
in the body (its `error.code` as type and code, `base.envelope_outcome`); a 2xx that is no
Response object is PROTOCOL. A stream's `response.failed` or `error` event becomes an `error`
event carrying `{"error": {"type", "code", "message"}}`: a failed attempt before the commit
point, the relay's final error event after it (`error_event`, the Responses `error` shape).
Sources: https://platform.openai.com/docs/api-reference/responses/create,
/docs/api-reference/responses/object, /docs/api-reference/responses-streaming.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, Final

import httpx
import msgspec
from httpx_sse import ServerSentEvent

from turnout.adapters.base import (
    SSE_MEDIA_TYPE,
    AttemptResult,
    CallSpec,
    NativeFrames,
    Refusal,
    Usage,
    envelope_outcome,
    error_status_outcome,
)
from turnout.adapters.commit import DONE
from turnout.adapters.prepared import post_request
from turnout.adapters.responses_chunks import DONE as RESPONSES_DONE
from turnout.adapters.responses_chunks import ChunkTranslator, StreamError, usage_of
from turnout.adapters.sse import EventBatch, event_batches
from turnout.core.native import RESPONSES, Native
from turnout.core.types import Outcome, TransportError

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()

PATH: Final = "/responses"
"""The endpoint under the provider's `base_url`."""
NOT_RESPONSES: Final = (
    "this offer is `api: responses`: it serves only requests that came on /v1/responses "
    "(sent as the client sent them), and this one did not"
)
"""Why an `api: responses` offer skips a chat, messages or completions request."""


def error_event(message: str, code: str, error_type: str | None = None) -> bytes:
    """The final `error` event of a broken native Responses stream (`ResponseErrorEvent`: `type`
    `error`, `code`, `message`, `param`); the code is the provider's error type when it sent
    one, else the relay's (`stream_interrupted`, `stream_stalled`, `upstream_error`). Its
    `sequence_number` is the ingress's to give (`turnout_ingress.surfaces.responses.native`)."""
    data = {"type": "error", "code": error_type or code, "message": message, "param": None}
    return b"event: error\ndata: " + _encode.encode(data) + b"\n\n"


def outcome_of_response_object(
    status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float
) -> AttemptResult:
    """An `AttemptResult` for a complete Responses answer (pure): a 2xx Response object is kept
    as is (`shape` `responses`), its usage read (`input_tokens`, `output_tokens`); one whose
    `status` is `failed`, or an error envelope, is `error_in_body`; any other 2xx is PROTOCOL.

    Args:
        status: HTTP status.
        headers: response headers (retry hints).
        content: the response body.
        now_epoch_s: current time, epoch seconds (hint dates).
    """
    if not 200 <= status < 300:
        return error_status_outcome(status, headers, content, now_epoch_s)
    try:
        data: Any = _decode.decode(content) if content else None
    except msgspec.DecodeError:
        data = None
    if isinstance(data, dict) and data.get("status") == "failed":
        raw_error = data.get("error")
        err: dict[str, Any] = raw_error if isinstance(raw_error, dict) else {}
        code = err.get("code") or "server_error"
        envelope = {"error": {"type": code, "code": code, "message": err.get("message") or "the response failed"}}
        return AttemptResult(outcome=envelope_outcome(status, envelope, headers, now_epoch_s))
    if isinstance(data, dict) and data.get("error") and data.get("object") != "response":
        return AttemptResult(outcome=envelope_outcome(status, data, headers, now_epoch_s))
    if not isinstance(data, dict) or data.get("object") != "response" or not isinstance(data.get("output"), list):
        return AttemptResult(
            outcome=Outcome(
                status=status,
                transport=TransportError.PROTOCOL,
                message="upstream answered 2xx with a body that is not a Response object",
            )
        )
    prompt, completion = usage_of(data.get("usage"))
    return AttemptResult(
        outcome=Outcome(status=status),
        body=content,
        usage=Usage(input_tokens=prompt, output_tokens=completion),
        shape=RESPONSES,
    )


async def translated_events(
    raw: AsyncIterator[EventBatch], translator: ChunkTranslator, native: NativeFrames | None = None
) -> AsyncIterator[list[ServerSentEvent]]:
    """Chat-chunk events for a Responses event source, one list per list of `raw` (as
    `turnout.adapters.anthropic_chat.translated_events` does for Anthropic's): one `data: {chunk}`
    per translated chunk, `data: [DONE]` after a terminal event (then ends), an `error` event
    `{"error": {"type", "code", "message"}}` for `response.failed` / `error` (then ends), malformed
    or non-object data unchanged. With `native`, every event fit to relay (a JSON object, not a
    failure) is added to it as sent before its list is yielded; a list that translates to nothing
    but added events gives an empty list (the provider's pace is kept)."""
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
                chunks = translator.feed(data)
            except StreamError as exc:
                error = {"error": {"type": exc.error_type, "code": exc.error_type, "message": exc.message}}
                out.append(ServerSentEvent(event="error", data=_encode.encode(error).decode()))
                yield out
                return
            if native is not None:
                native.add(sse)
                added = True
            if chunks == RESPONSES_DONE:
                out.extend(ServerSentEvent(data=_encode.encode(c).decode()) for c in translator.final(data))
                out.append(ServerSentEvent(data=DONE))
                yield out
                return
            out.extend(ServerSentEvent(data=_encode.encode(c).decode()) for c in chunks)
        if out or added:
            yield out


class OpenAIResponses:
    """The `ApiFamily` of the OpenAI Responses API (module doc)."""

    stream_end: Final = "response.completed"
    stream_media_type: Final = SSE_MEDIA_TYPE
    native_surface: Final = RESPONSES

    def refusal(self, request: dict[str, Any], model: str, native: Native | None = None) -> Refusal | None:
        """None for a request that came on `/v1/responses` (sent as it came); any other is refused
        (`NOT_RESPONSES`, param `model`): this API is never a translation target."""
        if native is not None and native.surface == RESPONSES:
            return None
        return Refusal(NOT_RESPONSES, "model")

    def native_frames(self) -> NativeFrames:
        """A gatherer with no end event of its own (`response.completed` is the provider's) and
        the Responses `error` event (`error_event`)."""
        return NativeFrames(end_frame=b"", error_frame=error_event)

    def build_request(
        self, client: httpx.AsyncClient, spec: CallSpec, *, stream: bool
    ) -> httpx.Request | AttemptResult:
        """`POST {base_url}/responses` with `spec.body` as is, the key in `authorization: Bearer`
        (or where the provider's `auth` says, with its extra headers: `CallSpec.key_headers`),
        the client's `openai-beta`, Turnout's request id; a call that is not native is a 400
        without a call (the router skips such a target first: `refusal`)."""
        if spec.native is None or spec.native.surface != RESPONSES:
            return AttemptResult(
                outcome=Outcome(
                    status=400, error_type="invalid_request_error", message=f"{NOT_RESPONSES} (param: model)"
                )
            )
        headers = [
            *spec.key_headers(),
            *spec.native.headers,
            ("content-type", "application/json"),
            ("x-request-id", spec.request_id),
        ]
        if stream:
            headers.append(("accept", "text/event-stream"))
        return post_request(client, spec.base_url, PATH, headers, spec.body)

    def read_outcome(
        self, status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float, *, native: bool = False
    ) -> AttemptResult:
        """See `outcome_of_response_object` (every call of this family is native)."""
        return outcome_of_response_object(status, headers, content, now_epoch_s)

    def stream_events(
        self, response: httpx.Response, native: NativeFrames | None = None
    ) -> AsyncIterator[list[ServerSentEvent]]:
        """The response's events translated to chat chunks (`translated_events`), one list per read;
        with `native`, gathered as sent too."""
        return translated_events(event_batches(response), ChunkTranslator(created_s=int(time.time())), native)


OPENAI_RESPONSES: Final = OpenAIResponses()
"""The family of `api: responses` offers."""
