"""The OpenAI Chat Completions API family (`openai`, `openai_compatible`).

Owns: the request for one target (`POST {base_url}/chat/completions` with a
Bearer key), the reading of a complete answer (`outcome_of_response`: the
body on success, an `Outcome` for the loop otherwise, an error envelope in
a 2xx included), and the events of a stream (passed as they come: they are
already OpenAI chunks). Sending, time limits and the commit point are
`turnout.adapters.exchange`'s.
Must not import: `turnout.adapters.exchange`, services, FastAPI, arq.

Wire format: https://platform.openai.com/docs/api-reference/chat/create,
https://platform.openai.com/docs/api-reference/chat-streaming and the error
object `{"error": {"message", "type", "param", "code"}}`.
"""

from __future__ import annotations

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
    crossing_refusal,
    envelope_outcome,
    error_status_outcome,
)
from turnout.adapters.commit import DONE
from turnout.adapters.prepared import post_request
from turnout.adapters.sse import EventBatch, event_batches
from turnout.core.native import CHAT, Native
from turnout.core.types import Outcome, TransportError

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()
DONE_FRAME: Final = b"data: [DONE]\n\n"
"""The event that ends a Chat Completions stream."""


def error_frame(message: str, code: str, error_type: str | None = None) -> bytes:
    """The final event of a broken Chat Completions stream: `data: {"error": {...}}` (type
    `upstream_error` unless the provider named one)."""
    body = {"error": {"message": message, "type": error_type or "upstream_error", "param": None, "code": code}}
    return b"data: " + _encode.encode(body) + b"\n\n"


async def _tapped(raw: AsyncIterator[EventBatch], native: NativeFrames) -> AsyncIterator[EventBatch]:
    """`raw`'s batches, each event fit to relay (a JSON object that is no error) added to `native` first."""
    async for batch in raw:
        for sse in batch:
            data = sse.data.strip()
            if data == DONE:
                native.add(sse)
                continue
            try:
                chunk = _decode.decode(data) if data else None
            except msgspec.DecodeError:
                continue
            if isinstance(chunk, dict) and not chunk.get("error") and sse.event != "error":
                native.add(sse)
        yield batch


def outcome_with_list(
    status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float, *, field: str, what: str
) -> AttemptResult:
    """A complete OpenAI answer whose success holds a list under `field` (pure): an error status
    keeps the provider's outcome; a 2xx carrying `{"error": {...}}` is flagged `error_in_body`
    so the core classifies it by its type and code, never as a success (SPEC §3); a 2xx that is
    not JSON or lacks the list is malformed (PROTOCOL, the message naming `what` it is not).
    Usage is read from `usage.prompt_tokens` / `usage.completion_tokens`."""
    if not 200 <= status < 300:
        return error_status_outcome(status, headers, content, now_epoch_s)
    try:
        data = _decode.decode(content) if content else None
    except msgspec.DecodeError:
        data = None
    if isinstance(data, dict) and "error" in data and data.get("error"):
        return AttemptResult(outcome=envelope_outcome(status, data, headers, now_epoch_s))
    if not isinstance(data, dict) or not isinstance(data.get(field), list):
        return AttemptResult(
            outcome=Outcome(
                status=status,
                transport=TransportError.PROTOCOL,
                message=f"upstream answered 2xx with a body that is not {what}",
            )
        )
    raw_usage = data.get("usage")
    usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
    return AttemptResult(
        outcome=Outcome(status=status),
        body=content,
        usage=Usage(
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
        ),
    )


def outcome_of_response(status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float) -> AttemptResult:
    """Turn a complete chat completions response into an `AttemptResult` (pure): success is a
    body with a `choices` list (`outcome_with_list`)."""
    return outcome_with_list(status, headers, content, now_epoch_s, field="choices", what="a chat completion")


class OpenAIChat:
    """The `ApiFamily` of OpenAI Chat Completions and the APIs compatible with it."""

    stream_end: Final = DONE
    stream_media_type: Final = SSE_MEDIA_TYPE
    native_surface: Final = CHAT
    path: str = "/chat/completions"
    """The endpoint under the provider's `base_url` (the OpenAI family's other operations
    change it: `turnout.adapters.openai_operations`)."""

    def refusal(self, request: dict[str, Any], model: str, native: Native | None = None) -> Refusal | None:
        """None: the request is sent as it came, unless it came on another surface and has no
        translation (`crossing_refusal`); see `ApiFamily`."""
        return crossing_refusal(native, CHAT)

    def native_frames(self) -> NativeFrames:
        """A gatherer whose end is `data: [DONE]` and whose error is OpenAI's shape; see `ApiFamily`."""
        return NativeFrames(end_frame=DONE_FRAME, error_frame=error_frame)

    def build_request(self, client: httpx.AsyncClient, spec: CallSpec, *, stream: bool) -> httpx.Request:
        """`POST {base_url}{path}` (`/chat/completions`) with `spec.body` as is; see `ApiFamily`.

        The key goes in `authorization: Bearer`, or where the provider's `auth` says, with its
        extra `headers` (`CallSpec.key_headers`; never logged or echoed); the client's passed
        headers (`CallSpec.passed`: `openai-beta`) as sent; Turnout's request id in `x-request-id`.
        """
        headers = [*spec.key_headers(), ("content-type", "application/json"), *spec.passed]
        if stream:
            headers.append(("accept", "text/event-stream"))
        headers.append(("x-request-id", spec.request_id))
        return post_request(client, spec.base_url, self.path, headers, spec.body)

    def read_outcome(
        self, status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float, *, native: bool = False
    ) -> AttemptResult:
        """See `outcome_of_response` (the body is the provider's either way: `native` changes nothing)."""
        return outcome_of_response(status, headers, content, now_epoch_s)

    def stream_events(
        self, response: httpx.Response, native: NativeFrames | None = None
    ) -> AsyncIterator[list[ServerSentEvent]]:
        """The response's SSE events, unchanged (they are OpenAI chunks already), one list per read;
        with `native`, each one fit to relay is also added to it (`ApiFamily.stream_events`)."""
        batches = event_batches(response)
        return batches if native is None else _tapped(batches, native)


OPENAI_CHAT: Final = OpenAIChat()
"""The family of `openai` and `openai_compatible` providers."""
