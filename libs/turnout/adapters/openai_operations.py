"""The OpenAI family's other operations: embeddings and legacy completions (`openai`, `openai_compatible`).

Owns: the request for one target (`POST {base_url}/embeddings`, `POST {base_url}/completions`,
the body as the client sent it with the target's model, a Bearer key) and the reading of a
complete answer (`outcome_of_embeddings`, `outcome_of_completion`: the body on success, an
`Outcome` for the loop otherwise, an error envelope in a 2xx included). A completions stream
passes its events as they come (`text_completion` chunks; `turnout.adapters.commit` finds
their first `text`). Sending, time limits and the commit point are `turnout.adapters.exchange`'s.
Must not import: `turnout.adapters.exchange`, services, FastAPI, arq.

Wire format: https://platform.openai.com/docs/api-reference/embeddings/create (a `list`
of `embedding` objects and `usage.prompt_tokens`) and
https://platform.openai.com/docs/api-reference/completions/create (`choices[].text`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Final

import httpx
import msgspec
from httpx_sse import ServerSentEvent

from turnout.adapters.base import AttemptResult, CallSpec, Refusal, Usage, envelope_outcome, error_status_outcome
from turnout.adapters.commit import DONE
from turnout.adapters.prepared import post_request
from turnout.adapters.sse import event_batches
from turnout.core.types import Outcome, TransportError

_decode = msgspec.json.Decoder()


def _read(
    status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float, *, field: str, what: str
) -> AttemptResult:
    """A complete answer whose success holds a list under `field` (pure): an error status keeps its
    outcome, a 2xx error envelope is `error_in_body`, a 2xx without the list is PROTOCOL; usage is
    read from `usage.prompt_tokens` / `usage.completion_tokens`."""
    if not 200 <= status < 300:
        return error_status_outcome(status, headers, content, now_epoch_s)
    try:
        data = _decode.decode(content) if content else None
    except msgspec.DecodeError:
        data = None
    if isinstance(data, dict) and data.get("error"):
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


def outcome_of_embeddings(status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float) -> AttemptResult:
    """An embeddings answer (pure): success is a body with a `data` list (`_read`)."""
    return _read(status, headers, content, now_epoch_s, field="data", what="an embedding list")


def outcome_of_completion(status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float) -> AttemptResult:
    """A legacy completions answer (pure): success is a body with a `choices` list (`_read`)."""
    return _read(status, headers, content, now_epoch_s, field="choices", what="a text completion")


class _Operation:
    """One OpenAI endpoint beside chat completions, as an `ApiFamily`."""

    stream_end: Final = DONE

    def __init__(self, path: str) -> None:
        self._path = path

    def refusal(self, request: dict[str, Any], model: str) -> Refusal | None:
        """None: the request is sent as it came; see `ApiFamily`."""
        return None

    def build_request(self, client: httpx.AsyncClient, spec: CallSpec, *, stream: bool) -> httpx.Request:
        """`POST {base_url}{path}` with `spec.body` as is, the key as `authorization: Bearer`
        (never logged or echoed), Turnout's request id in `x-request-id`; see `ApiFamily`."""
        headers = [("authorization", f"Bearer {spec.api_key}"), ("content-type", "application/json")]
        if stream:
            headers.append(("accept", "text/event-stream"))
        headers.append(("x-request-id", spec.request_id))
        return post_request(client, spec.base_url, self._path, headers, spec.body)

    def stream_events(self, response: httpx.Response) -> AsyncIterator[list[ServerSentEvent]]:
        """The response's SSE events, unchanged, one list per read."""
        return event_batches(response)


class OpenAIEmbeddings(_Operation):
    """`POST {base_url}/embeddings` (never streamed)."""

    def read_outcome(self, status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float) -> AttemptResult:
        """See `outcome_of_embeddings`."""
        return outcome_of_embeddings(status, headers, content, now_epoch_s)


class OpenAICompletions(_Operation):
    """`POST {base_url}/completions`, the legacy text completions."""

    def read_outcome(self, status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float) -> AttemptResult:
        """See `outcome_of_completion`."""
        return outcome_of_completion(status, headers, content, now_epoch_s)


OPENAI_EMBEDDINGS: Final = OpenAIEmbeddings("/embeddings")
"""Embeddings on `openai` and `openai_compatible` providers."""
OPENAI_COMPLETIONS: Final = OpenAICompletions("/completions")
"""Legacy completions on `openai` and `openai_compatible` providers."""
