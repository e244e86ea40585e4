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
    AttemptResult,
    CallSpec,
    Refusal,
    Usage,
    envelope_outcome,
    error_status_outcome,
)
from turnout.adapters.commit import DONE
from turnout.adapters.prepared import post_request
from turnout.adapters.sse import event_batches
from turnout.core.types import Outcome, TransportError

_decode = msgspec.json.Decoder()


def outcome_of_response(status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float) -> AttemptResult:
    """Turn a complete upstream response into an `AttemptResult` (pure).

    A 2xx whose body is not JSON or lacks `choices` is malformed (PROTOCOL);
    a 2xx carrying `{"error": {...}}` is flagged `error_in_body` so the core
    classifies it by its type and code, never as a success (SPEC §3).
    """
    if not 200 <= status < 300:
        return error_status_outcome(status, headers, content, now_epoch_s)
    try:
        data = _decode.decode(content) if content else None
    except msgspec.DecodeError:
        data = None
    if isinstance(data, dict) and "error" in data and data.get("error"):
        return AttemptResult(outcome=envelope_outcome(status, data, headers, now_epoch_s))
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
        return AttemptResult(
            outcome=Outcome(
                status=status,
                transport=TransportError.PROTOCOL,
                message="upstream answered 2xx with a body that is not a chat completion",
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


class OpenAIChat:
    """The `ApiFamily` of OpenAI Chat Completions and the APIs compatible with it."""

    stream_end: Final = DONE

    def refusal(self, request: dict[str, Any], model: str) -> Refusal | None:
        """None: the request is sent as it came; see `ApiFamily`."""
        return None

    def build_request(self, client: httpx.AsyncClient, spec: CallSpec, *, stream: bool) -> httpx.Request:
        """`POST {base_url}/chat/completions` with `spec.body` as is; see `ApiFamily`.

        The key goes in `authorization: Bearer` (never logged or echoed);
        Turnout's request id in `x-request-id`.
        """
        headers = [("authorization", f"Bearer {spec.api_key}"), ("content-type", "application/json")]
        if stream:
            headers.append(("accept", "text/event-stream"))
        headers.append(("x-request-id", spec.request_id))
        return post_request(client, spec.base_url, "/chat/completions", headers, spec.body)

    def read_outcome(self, status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float) -> AttemptResult:
        """See `outcome_of_response`."""
        return outcome_of_response(status, headers, content, now_epoch_s)

    def stream_events(self, response: httpx.Response) -> AsyncIterator[list[ServerSentEvent]]:
        """The response's SSE events, unchanged (they are OpenAI chunks already), one list per read."""
        return event_batches(response)


OPENAI_CHAT: Final = OpenAIChat()
"""The family of `openai` and `openai_compatible` providers."""
