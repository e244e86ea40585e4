"""Relay: forward a committed upstream stream to the client (SPEC §8).

Owns: everything after the commit point. The held frames go first, then the
live events, one at a time (the client's pace is the upstream's: nothing is
buffered beyond one event). The stream is never retried once committed:
- `[DONE]` ends it normally;
- an upstream error, a reset or a cut ends it with a final
  `data: {"error": {...}}` event naming the real cause, and no `[DONE]`;
- the stall watchdog ends a stream that stops sending for `stall_timeout_s`;
- a malformed event after content is skipped and logged, not forwarded;
- an HTTP-level end without `[DONE]` after a `finish_reason` is finalised at
  once with `[DONE]`;
- the usage-only chunk is forwarded only if the client asked for it
  (`stream_options.include_usage`); usage is always recorded.
The attempt's final outcome reaches the breaker and the observers through
`finish`, exactly once, also when the client goes away (CANCELLED).
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import msgspec

from turnout.adapters.openai_chat import Usage
from turnout.adapters.openai_stream import DONE, UpstreamStream
from turnout.adapters.transport import transport_error_of
from turnout.core.types import FailureKind, TransportError
from turnout.router import Finish

log = logging.getLogger("turnout.stream")
_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()
DONE_FRAME = b"data: [DONE]\n\n"

_TRANSPORT_KIND = {
    TransportError.CONNECT: FailureKind.TRANSPORT,
    TransportError.RESET: FailureKind.TRANSPORT,
    TransportError.ATTEMPT_TIMEOUT: FailureKind.TIMEOUT,
    TransportError.FIRST_TOKEN_TIMEOUT: FailureKind.TIMEOUT,
    TransportError.PROTOCOL: FailureKind.MALFORMED,
}


def frame(data: str) -> bytes:
    """One SSE event carrying `data` (a JSON text)."""
    return b"data: " + data.encode("utf-8") + b"\n\n"


def _client_frame(data: str, chunk: dict[str, Any], include_usage: bool) -> bytes:
    """The frame as the client asked for it: without the `usage: null` field
    that asking upstream for usage adds to every chunk, unless it asked too."""
    if not include_usage and "usage" in chunk and chunk["usage"] is None:
        del chunk["usage"]
        return b"data: " + _encode.encode(chunk) + b"\n\n"
    return frame(data)


def error_frame(message: str, *, code: str, error_type: str = "upstream_error") -> bytes:
    """The final event of a broken stream, in OpenAI's error shape."""
    body = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
    return b"data: " + _encode.encode(body) + b"\n\n"


class _Tally:
    """What the relay learnt from the chunks it saw."""

    def __init__(self) -> None:
        self.usage = Usage()
        self.finished = False

    def see(self, chunk: dict[str, Any]) -> bool:
        """Track usage and finish; True when the chunk is usage-only."""
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = Usage(
                input_tokens=int(usage.get("prompt_tokens") or 0),
                output_tokens=int(usage.get("completion_tokens") or 0),
            )
        choices = chunk.get("choices")
        if isinstance(choices, list):
            if any(isinstance(c, dict) and c.get("finish_reason") for c in choices):
                self.finished = True
            return not choices and isinstance(usage, dict)
        return False


async def relay(
    stream: UpstreamStream,
    *,
    finish: Finish,
    include_usage: bool,
    stall_timeout_s: float | None,
    request_id: str,
) -> AsyncIterator[bytes]:
    """The client's SSE bytes for a committed stream (see module doc).

    Args:
        stream: the committed upstream stream.
        finish: records the attempt's final outcome; called exactly once.
        include_usage: the client asked for the usage chunk.
        stall_timeout_s: longest gap between upstream events, seconds (None: no watchdog).
        request_id: for log lines.

    Yields:
        SSE frames (bytes), ending with `data: [DONE]` or a final error event.
    """
    tally = _Tally()
    kind, error = FailureKind.SUCCESS, ""
    try:
        for data in stream.held:
            held = _decode.decode(data)
            if not (tally.see(held) and not include_usage):
                yield _client_frame(data, held, include_usage)
        if stream.done:
            yield DONE_FRAME
            return
        while True:
            try:
                async with asyncio.timeout(stall_timeout_s):
                    sse = await stream.events.__anext__()
            except StopAsyncIteration:
                if tally.finished:
                    yield DONE_FRAME  # finished, the HTTP body just ended without [DONE]
                    return
                kind, error = FailureKind.TRANSPORT, "the upstream stream ended before the answer was complete"
                yield error_frame(error, code="stream_interrupted")
                return
            except TimeoutError:
                kind = FailureKind.TIMEOUT
                error = f"the upstream stream stalled: no event for {stall_timeout_s:.3f} s"
                yield error_frame(error, code="stream_stalled")
                return
            except Exception as exc:  # noqa: BLE001 - any transport failure ends the stream with its cause
                kind = _TRANSPORT_KIND[transport_error_of(exc)]
                error = f"the upstream connection failed mid-stream ({type(exc).__name__})"
                yield error_frame(error, code="stream_interrupted")
                return
            data = sse.data
            if data.strip() == DONE:
                yield DONE_FRAME
                return
            if not data.strip():
                continue
            try:
                chunk = _decode.decode(data)
            except msgspec.DecodeError:
                log.warning("request %s: skipped a malformed stream event after content", request_id)
                continue
            if not isinstance(chunk, dict):
                log.warning("request %s: skipped a non-object stream event", request_id)
                continue
            if sse.event == "error" or chunk.get("error"):
                err = chunk.get("error")
                message = err.get("message", "") if isinstance(err, dict) else str(err)
                kind, error = FailureKind.SERVER_ERROR, f"the upstream provider failed mid-stream: {message}"
                yield error_frame(error, code="upstream_error")
                return
            if tally.see(chunk) and not include_usage:
                continue
            yield _client_frame(data, chunk, include_usage)
    except (asyncio.CancelledError, GeneratorExit):
        kind, error = FailureKind.CANCELLED, "client went away"
        raise
    finally:
        with anyio.CancelScope(shield=True):
            await stream.aclose()
            await finish(kind, tally.usage, error)
