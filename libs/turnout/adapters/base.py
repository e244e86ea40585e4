"""The adapter seam: what the router hands an adapter, what it gets back.

Owns: the input of one upstream call (`CallSpec`, with its body built by
`upstream_body`), its result (`AttemptResult`, `Usage`, and `UpstreamStream`
for a stream past its commit point), the `Upstream` signature the router
calls, the `ApiFamily` protocol each upstream API family implements, and
the readers every family shares (`error_fields`, `envelope_outcome`,
`error_status_outcome`, `describe_error`).
Must not import: other `turnout.adapters` modules, services, FastAPI, arq.

Bodies are OpenAI Chat Completions JSON on both sides of the seam: a family
that speaks another API translates its request in `build_request` and its
answers in `read_outcome` and `stream_events` — except a native call
(`CallSpec.native`: the client spoke the family's own surface, SPEC §13 "same
family, same bytes"), whose body is the client's own, whose complete answer is
the provider's body as is (`AttemptResult.shape`), and whose stream events are
also kept as the provider sent them (`NativeFrames`) while the OpenAI-shaped
events still drive the commit point, usage and error detection.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NamedTuple, Protocol

import httpx
import msgspec
from httpx_sse import ServerSentEvent

from turnout.config import OfferApi, ProviderKind
from turnout.core.hints import retry_after_s, should_retry_hint
from turnout.core.model_types import Operation
from turnout.core.native import CHAT, Native
from turnout.core.types import Outcome, Target, TransportError
from turnout.core.upstream_auth import ProviderAuth, auth_headers

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """Token counts of one successful call."""

    input_tokens: int = 0
    output_tokens: int = 0


class NativeFrames:
    """A native stream's events as the provider sent them, gathered for the relay (SPEC §13).

    The family's `stream_events` adds every event of a read (`add`) before it yields
    that read's OpenAI-shaped events, so what the relay `take`s after handling a batch is
    exactly the provider's events up to that read, in order. Error events and data that
    is not a JSON object are never added: the relay ends a stream with its own final
    event (`error_frame`, the provider's text scrubbed) and skips malformed data, as on
    every stream.

    Args:
        end_frame: the event that ends a stream cleanly in this surface, sent when the
            provider's body ended after its finish without it (`event: message_stop`).
        error_frame: the surface's final error event for (message, code, provider error
            type or None), code as the relay names it (`stream_interrupted`,
            `stream_stalled`, `upstream_error`).
    """

    def __init__(self, *, end_frame: bytes, error_frame: Callable[[str, str, str | None], bytes]) -> None:
        self.end_frame = end_frame
        self.error_frame = error_frame
        self._frames: list[bytes] = []

    def add(self, sse: ServerSentEvent) -> None:
        """Keep one event as sent: its `event:` line (when named) and its data, unchanged."""
        name = sse.event
        head = b"" if not name or name == "message" else b"event: " + name.encode() + b"\n"
        self._frames.append(head + b"data: " + sse.data.encode() + b"\n\n")

    def take(self) -> bytes:
        """Every event added since the last `take`, as one write (empty: none), and forget them."""
        out = b"".join(self._frames)
        self._frames.clear()
        return out


class UpstreamStream:
    """An upstream stream past its commit point.

    Attributes:
        held: data payloads (JSON text) read before the commit, in order,
            including the first content chunk; the relay sends them first.
        done: the stream already ended cleanly (`[DONE]`, or a finish with
            no content: an empty completion).
        pending: events already read after the commit point (those that
            came in the same read as the first content), not yet examined;
            the relay sends them with `held`.
        events: the rest of the stream's events, OpenAI-shaped whatever the
            family, one list per read (`ApiFamily.stream_events`).
        native: for a native call, the provider's own events (`NativeFrames`),
            which the relay sends instead of the OpenAI-shaped ones; else None.
    """

    def __init__(
        self,
        response: httpx.Response,
        events: AsyncIterator[list[ServerSentEvent]],
        held: list[str],
        done: bool,
        pending: list[ServerSentEvent] | None = None,
    ) -> None:
        self._response = response
        self.events = events
        self.held = held
        self.done = done
        self.pending = pending or []
        self.native: NativeFrames | None = None

    async def aclose(self) -> None:
        """Close the upstream response (and its connection if unfinished).

        The events' reader (a chain of async generators down to the socket)
        is first run to its end when that needs no waiting: the end of the
        body is usually already received with `[DONE]`. Its generators then
        finish normally, and the connection goes back to the pool read to
        its end; a reader left suspended instead is closed by the event
        loop's async-generator finalizer, one scheduled task per generator
        of the chain (six a stream with httpx over aiohttp). A reader that
        would wait is cancelled at once, which ends its generators too; the
        events it would have given are dropped (the relay has finished).
        """
        with contextlib.suppress(Exception):
            async with asyncio.timeout(0):  # no waiting: only what is already received
                async for _ in self.events:
                    pass
        await self._response.aclose()


class AttemptResult(msgspec.Struct, frozen=True, kw_only=True):
    """What one upstream call produced.

    Attributes:
        outcome: the classified-later facts for the loop.
        body: the upstream's JSON body on success (bytes, in `shape`), else None.
        usage: token counts on success.
        stream: for a streaming call committed at its first content, the open
            upstream stream (`UpstreamStream`).
        shape: the surface `body` is in: `chat` (an OpenAI `chat.completion`,
            translated where the family speaks another API), or a native call's
            surface (`messages`, `responses`: the provider's own body, unchanged).
    """

    outcome: Outcome
    body: bytes | None = None
    usage: Usage = Usage()
    stream: Any = None
    shape: str = CHAT


class CallSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One upstream call, as the router hands it to an adapter.

    Attributes:
        target: the offer attempted.
        base_url: the provider's API root.
        api_key: the credential (never logged).
        body: JSON request body for this target, OpenAI form (`upstream_body`).
        timeout_s: the attempt's limit; for a stream, until its first content.
        ttft_timeout_s: streaming first-token limit (None: `timeout_s` only).
        stall_timeout_s: streaming gap limit after the first content (None: none).
        request_id: Turnout's request id.
        kind: the provider's wire API (`ProviderConfig.kind`), the key of
            its family in `turnout.adapters.families.FAMILIES`.
        operation: the call asked for (`turnout.core.model_types.Operation`):
            `chat`, `embeddings` or `completions`; with `kind` it chooses the
            family (`turnout.adapters.families.family_for`). `body` is that
            operation's OpenAI request.
        native: the client's own request when the family speaks its surface
            (`body` is then the client's body for this target, `native_body`);
            None: `body` is the OpenAI request.
        api_version: the API version the provider's requests name
            (`ProviderConfig.api_version`: Azure OpenAI's `api-version`), or None.
        project, location: a `vertex` provider's Google Cloud project and Vertex AI location
            (`ProviderConfig.project`, `.location`: the URL's `/projects/{p}/locations/{l}`), or None.
        credentials_file: a `vertex` provider's service-account key file; with it the call
            carries an OAuth2 access token made from the file (`turnout.adapters.google_tokens`),
            `api_key` unused. None: the call carries `api_key`.
        api: the offer's upstream API (`turnout.config.OfferApi`); with `kind` and
            `operation` it chooses the family (`responses`: the Responses family).
        auth: where the key goes (`ProviderConfig.auth`; None: `authorization: Bearer`).
        headers: the provider's extra headers (`ProviderConfig.headers`; never logged), or None.
        passed: client headers sent as they came to a family of the client's surface whose
            `body` is the OpenAI request itself (a chat client's `openai-beta` to an OpenAI-family
            provider, `turnout.core.native.PASSED_HEADERS`): (lower-case name, value) pairs.
        region: the provider's AWS region (`ProviderConfig.region`: a `bedrock` provider's
            signing region), or None.
    """

    target: Target
    base_url: str
    api_key: str
    body: bytes
    timeout_s: float
    request_id: str
    ttft_timeout_s: float | None = None
    stall_timeout_s: float | None = None
    kind: ProviderKind = "openai"
    operation: Operation = "chat"
    native: Native | None = None
    api_version: str | None = None
    api: OfferApi = "chat"
    auth: ProviderAuth | None = None
    headers: dict[str, str] | None = None
    passed: tuple[tuple[str, str], ...] = ()
    region: str | None = None
    project: str | None = None
    location: str | None = None
    credentials_file: str | None = None

    def key_headers(self) -> list[tuple[str, str]]:
        """The headers carrying the key and the provider's extra headers, for the OpenAI
        families (`turnout.core.upstream_auth.auth_headers`: no key header when the key is "")."""
        return auth_headers(self.api_key, self.auth, self.headers)


CountCall = tuple[httpx.Request | AttemptResult, str]
"""A family's token-count request for a call (`TokenCounting.count_request`): the request (or the
result of a count its API cannot make, answered without a call) and the answer's count field."""


class TokenCounting(Protocol):
    """A family whose API counts a Messages request's input tokens (`turnout.adapters.token_counts`)."""

    def count_request(
        self, client: httpx.AsyncClient, spec: CallSpec, messages: dict[str, Any], request: dict[str, Any] | None
    ) -> CountCall:
        """The count-tokens request of `spec` (its credential ready, `api_key`) for the Anthropic
        Messages body `messages`, whose OpenAI chat form is `request` (None: it has none); pure.

        Raises:
            WireError: the body cannot be expressed in the family's API (or has no chat form).
        """
        ...


Upstream = Callable[[httpx.AsyncClient, CallSpec], Awaitable[AttemptResult]]
"""An adapter: performs one call and maps every failure into the result
(`turnout.adapters.exchange.call_json`, `...exchange.open_stream`)."""


class Refusal(NamedTuple):
    """What an API family cannot express of a request (`ApiFamily.refusal`).

    Attributes:
        message: the reason, naming the field (a sentence).
        param: the request field, as an error body's `param` names it (`n`, `messages[2].role`).
    """

    message: str
    param: str


class ApiFamily(Protocol):
    """One upstream API family: how a call is asked and how its answer is read.

    A family performs no I/O: `turnout.adapters.exchange` sends its requests,
    enforces the time limits, maps transport errors and finds a stream's
    commit point, the same way for every family.
    """

    @property
    def stream_end(self) -> str:
        """The family's end-of-stream marker as named in failure messages (`[DONE]`)."""
        ...

    @property
    def stream_media_type(self) -> str:
        """The media type of the family's stream answers (`text/event-stream`; Bedrock's
        `application/vnd.amazon.eventstream`): an answer of another type to a stream request
        is read as a complete answer (an error status, else a PROTOCOL failure)."""
        ...

    @property
    def native_surface(self) -> str:
        """The client surface this family speaks as is (`turnout.core.native`: `chat`, `messages`)."""
        ...

    def refusal(self, request: dict[str, Any], model: str, native: Native | None = None) -> Refusal | None:
        """Why the family's API has no form for `request`, or None when it can express it; pure.

        Asked before an attempt starts: a target whose API cannot express the
        request is skipped (not attempted, not counted against its health) and
        the next target of the plan is tried (`turnout.core.loop.SkipReason.UNSUPPORTED`).

        Args:
            request: the OpenAI Chat Completions request (decoded JSON).
            model: the target's model name at its provider.
            native: the client's own request, when it came on a surface other than
                `chat`: of the family's own surface it is sent as is (no refusal);
                of another, one that has no translation (`Native.crossing`) is refused.
        """
        ...

    def native_frames(self) -> NativeFrames:
        """A fresh gatherer of a native stream's events, with this surface's end and error events."""
        ...

    def build_request(
        self, client: httpx.AsyncClient, spec: CallSpec, *, stream: bool
    ) -> httpx.Request | AttemptResult:
        """The HTTP request for `spec` (built with `client.build_request`).

        Args:
            client: the client that will send it.
            spec: the call; `spec.body` is OpenAI Chat Completions JSON.
            stream: ask for an SSE answer.

        Returns:
            The request, or the result of a call the family's API cannot
            express (answered without any HTTP call, e.g. a 400).
        """
        ...

    def read_outcome(
        self, status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float, *, native: bool = False
    ) -> AttemptResult:
        """The result of a complete (non-SSE) answer; pure.

        Args:
            status: HTTP status.
            headers: response headers (retry hints).
            content: the whole body.
            now_epoch_s: current time, epoch seconds (hint dates, `created`).
            native: the call was native (`CallSpec.native`): a success keeps
                `content` as is, `shape` the family's surface.

        Returns:
            A success carries an OpenAI `chat.completion` body (or, native, the
            provider's); a 2xx error envelope is `error_in_body`; a 2xx that is
            neither is PROTOCOL. Usage is read either way.
        """
        ...

    def stream_events(
        self, response: httpx.Response, native: NativeFrames | None = None
    ) -> AsyncIterator[list[ServerSentEvent]]:
        """The events of an SSE answer as OpenAI `chat.completion.chunk` data, one list per read.

        Each list holds the events that one read of the body completed, in
        order (`turnout.adapters.sse.event_batches`), and is never empty, so
        that several events that arrived together can be relayed in one
        write. Each event's data is a chunk's JSON text or `[DONE]`; an error
        is an event named `error` whose data is `{"error": {"type",
        "message"}}` (or an OpenAI error envelope); undecodable data passes
        unchanged. Transport exceptions propagate. With `native`, every event
        fit to relay is also added to it, before the list of its read is
        yielded, and a read whose events translate to nothing still yields an
        empty list when it added any (a native stream's thinking deltas and
        pings keep their pace).
        """
        ...


SSE_MEDIA_TYPE = "text/event-stream"
"""The media type of an SSE stream (`ApiFamily.stream_media_type` of the SSE families)."""


def crossing_refusal(native: Native | None, surface: str) -> Refusal | None:
    """The refusal of a family speaking `surface` for a client request that has no translation
    to it: `native.crossing` when `native` came on another surface, else None (pure)."""
    if native is None or native.surface == surface or native.crossing is None:
        return None
    message, param = native.crossing
    return Refusal(message, param)


def upstream_body(request: dict[str, Any], target: Target) -> bytes:
    """The request body for `target`: the client's body with `model` replaced."""
    return _encode.encode({**request, "model": target.model})


def error_fields(data: Any) -> tuple[str | None, str | None, str]:
    """(type, code, message) of an OpenAI- or Anthropic-style error body.

    Reads `{"error": {"type", "code", "message"}}`, a bare `{"type", ...}`
    object, or `{"error": "text"}`; anything else gives (None, None, "").
    """
    if not isinstance(data, dict):
        return None, None, ""
    err = data.get("error", data)
    if isinstance(err, str):
        return None, None, err
    if not isinstance(err, dict):
        return None, None, ""
    etype, code, message = err.get("type"), err.get("code"), err.get("message", "")
    return (
        etype if isinstance(etype, str) else None,
        str(code) if isinstance(code, (str, int)) and code != "" else None,
        message if isinstance(message, str) else str(message),
    )


def envelope_outcome(status: int, data: Any, headers: httpx.Headers, now_epoch_s: float) -> Outcome:
    """The outcome of an error envelope inside a 2xx answer or stream (SPEC §3).

    Flagged `error_in_body`, so the core classifies it by its type and code,
    never as a success; a retry hint in the headers or the message is kept.

    Args:
        status: the HTTP status the envelope came with (2xx).
        data: the decoded body or event data.
        headers: response headers (retry hints).
        now_epoch_s: current time, epoch seconds (hint dates).
    """
    etype, code, message = error_fields(data)
    hint = retry_after_s(headers, status=None, message=message, now_epoch_s=now_epoch_s)
    return Outcome(
        status=status,
        error_type=etype,
        error_code=code,
        message=message,
        retry_after_s=hint,
        error_in_body=True,
        should_retry=should_retry_hint(headers),
    )


def error_status_outcome(status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float) -> AttemptResult:
    """The result of a non-2xx answer, whatever the family (pure).

    Keeps the provider's status, error type, code and message (its first
    300 bytes when the body is not JSON) and its retry hint (`retry-after`,
    `retry-after-ms`, rate-limit reset headers, or the message's wording).
    """
    try:
        data = _decode.decode(content) if content else None
    except msgspec.DecodeError:
        data = None
    etype, code, message = error_fields(data)
    if not message and content and data is None:
        message = content[:300].decode("utf-8", "replace")
    hint = retry_after_s(headers, status=status, message=message, now_epoch_s=now_epoch_s)
    return AttemptResult(
        outcome=Outcome(
            status=status,
            error_type=etype,
            error_code=code,
            message=message,
            retry_after_s=hint,
            should_retry=should_retry_hint(headers),
        )
    )


_TRANSPORT_WORDS = {
    TransportError.CONNECT: "could not connect to the provider",
    TransportError.RESET: "the provider closed the connection",
    TransportError.ATTEMPT_TIMEOUT: "no answer within the attempt's time limit",
    TransportError.FIRST_TOKEN_TIMEOUT: "no first content within the time limit",
    TransportError.PROTOCOL: "the provider's answer could not be read",
}


def describe_error(exc: BaseException, kind: TransportError) -> str:
    """A transport failure as a fixed phrase for its kind and its cause's class name
    (`could not connect to the provider (ClientConnectorError)`).

    Allow-list: the exception's text is never used, since it carries host
    names, ports, resolved addresses and sometimes URLs (`turnout.scrub`).
    """
    cause = exc.__cause__ or exc
    return f"{_TRANSPORT_WORDS[kind]} ({type(cause).__name__})"


@functools.lru_cache(maxsize=4096)
def endpoint_url(base_url: str, path: str) -> httpx.URL:
    """`base_url` (trailing `/` dropped) + `path`, parsed once per (base URL, path).

    httpx parses a string URL on every `build_request`; a provider's
    endpoint is the same for every attempt, so the parsed URL is kept (at
    most 4,096 endpoints: the catalog's and tenants' custom ones).

    Raises:
        httpx.InvalidURL, ValueError: the URL cannot be parsed (not cached).
    """
    return httpx.URL(base_url.rstrip("/") + path)
