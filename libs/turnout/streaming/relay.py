"""Relay: forward a committed upstream stream to the client (SPEC §8).

Owns: everything after the commit point. The held frames go first, with the events
read together with the first content, in one write; then the live events, one write
per upstream read carrying every event that read completed (the client's pace is
the upstream's: nothing waits for a later read, and several events that arrived
together cost one socket send, not one each). The stream is never retried once
committed:
- `[DONE]` ends it normally;
- an upstream error, a reset or a cut ends it with a final
  `data: {"error": {...}}` event naming the real cause, and no `[DONE]`
  (the HTTP client drops bytes it had received but not yet handed over when
  the connection breaks, so the last events before a cut may be missing:
  never repeated or reordered);
- the stall watchdog ends a stream that stops sending for `stall_timeout_s`;
- a malformed event after content is skipped and logged, not forwarded;
- an HTTP-level end without `[DONE]` after a `finish_reason` is finalised at
  once with `[DONE]`;
- the usage-only chunk is forwarded only if the client asked for it
  (`stream_options.include_usage`); usage is always recorded, each attempt
  its own; after a continuation the client's usage is the whole answer's
  (`turnout.streaming.continuation.whole_answer_usage`).
The attempt's final outcome reaches the breaker and the observers through
`finish`, exactly once, also when the client goes away (CANCELLED).

A native stream (`UpstreamStream.native`: the client spoke the provider's own
API, SPEC §13) is relayed as the provider sent it: each write carries the
provider's events of that read (`NativeFrames.take`) instead of the
OpenAI-shaped chunks, which are still read for the usage, the finish and
errors; its own end and final error events are the surface's
(`NativeFrames.end_frame`, `.error_frame`, the provider's error type kept).
A native stream is never continued: a continuation's events (a second
`message_start`, its block indexes from 0) cannot be spliced into it as one
answer, so a native stream that breaks ends with the final error event, as
every stream does without `stream_recovery: continue`.
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import msgspec

from turnout.adapters.base import UpstreamStream, Usage
from turnout.adapters.commit import DONE, is_content
from turnout.adapters.transport import transport_error_of
from turnout.core.types import FailureKind, Target, TransportError
from turnout.router import Finish
from turnout.scrub import Scrubber
from turnout.streaming.continuation import Continuation, whole_answer_usage

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
    """What the relay learnt from the chunks it forwarded."""

    def __init__(self) -> None:
        self.usage = Usage()
        self.finished = False
        self.tool_calls = False
        self.text: list[str] = []
        self.content_deltas = 0
        self.chunk_id: str | None = None

    def see(self, chunk: dict[str, Any]) -> bool:
        """Track usage, finish, tool calls and delivered text; True when the chunk is usage-only."""
        if self.chunk_id is None and isinstance(chunk.get("id"), str):
            self.chunk_id = chunk["id"]
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = Usage(
                input_tokens=int(usage.get("prompt_tokens") or 0),
                output_tokens=int(usage.get("completion_tokens") or 0),
            )
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return False
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            if choice.get("finish_reason"):
                self.finished = True
            delta = choice.get("delta")
            if isinstance(delta, dict):
                if isinstance(delta.get("content"), str):
                    self.text.append(delta["content"])
                    self.content_deltas += 1 if delta["content"] else 0
                if delta.get("tool_calls") or delta.get("function_call"):
                    self.tool_calls = True
        return not choices and isinstance(usage, dict)


class _Broken(Exception):
    """The current upstream stream broke after the commit point (`error_type`: the provider's, if it sent one)."""

    def __init__(self, kind: FailureKind, error: str, code: str, error_type: str | None = None) -> None:
        super().__init__(error)
        self.kind, self.error, self.code, self.error_type = kind, error, code, error_type


async def _next_batch(stream: UpstreamStream, stall_timeout_s: float | None, tally: _Tally) -> list[Any] | None:
    """The upstream events of the next read, or None at a clean end; raises `_Broken`."""
    try:
        async with asyncio.timeout(stall_timeout_s):
            return await anext(stream.events)
    except StopAsyncIteration:
        if tally.finished:
            return None  # finished, the HTTP body just ended without [DONE]
        raise _Broken(
            FailureKind.TRANSPORT, "the upstream stream ended before the answer was complete", "stream_interrupted"
        ) from None
    except TimeoutError:
        raise _Broken(
            FailureKind.TIMEOUT, f"the upstream stream stalled: no event for {stall_timeout_s:.3f} s", "stream_stalled"
        ) from None
    except (asyncio.CancelledError, _Broken):
        raise
    except Exception as exc:
        raise _Broken(
            _TRANSPORT_KIND[transport_error_of(exc)],
            f"the upstream connection failed mid-stream ({type(exc).__name__})",
            "stream_interrupted",
        ) from exc


def _taken(frames: list[bytes]) -> bytes:
    """The frames as one write, and `frames` emptied (so a frame is never sent twice)."""
    out = frames[0] if len(frames) == 1 else b"".join(frames)
    frames.clear()
    return out


async def relay(
    stream: UpstreamStream,
    *,
    finish: Finish,
    include_usage: bool,
    stall_timeout_s: float | None,
    request_id: str,
    continuation: Continuation | None = None,
    target: Target | None = None,
    scrub: Callable[[str], str] | None = None,
) -> AsyncIterator[bytes]:
    """The client's SSE bytes for a committed stream (see module doc).

    Args:
        stream: the committed upstream stream.
        finish: records the attempt's final outcome; called exactly once.
        include_usage: the client asked for the usage chunk.
        stall_timeout_s: longest gap between upstream events, seconds (None: no watchdog).
        request_id: for log lines.
        continuation: with policy `stream_recovery: continue`, continues a
            broken text stream on a prefill-capable target; None: never.
        target: the target serving `stream` (where a continuation starts).
        scrub: the process's egress scrubber (`Scrubber.text`): an upstream's
            mid-stream error text passes it before the client's final event,
            the logs and `finish` see it (default: one that knows no keys,
            only their shapes).

    Yields:
        SSE frames (bytes), ending with `data: [DONE]` or a final error event.
    """
    tally = _Tally()
    clean = scrub or Scrubber().text
    native = stream.native  # the provider's own events go out instead of the chunks (module doc)
    kind, error = FailureKind.SUCCESS, ""
    finished = False
    continuing = False
    delivered_before = 0  # content deltas the client had when the latest continuation began

    def client_frame(data: str, chunk: dict[str, Any]) -> bytes | None:
        usage_only = tally.see(chunk)
        if native is not None or usage_only and not include_usage:
            return None  # a native stream's client gets the provider's events (`take_native`)
        if not continuing:
            return _client_frame(data, chunk, include_usage)
        if tally.chunk_id is not None:
            chunk["id"] = tally.chunk_id  # one seamless answer: the first stream's id throughout
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            whole = whole_answer_usage(tally.usage, delivered_before)
            chunk["usage"] = {
                **usage,
                "prompt_tokens": whole.input_tokens,
                "completion_tokens": whole.output_tokens,
                "total_tokens": whole.input_tokens + whole.output_tokens,
            }
        return _client_frame(_encode.encode(chunk).decode(), chunk, include_usage)

    def client_frames(batch: list[Any], frames: list[bytes]) -> bool:
        """Append the client's frames for `batch` to `frames`; True at the end of the stream.

        Raises `_Broken` at an upstream error event, with the frames before it appended.
        """
        if native is not None:
            take_native(frames)
        for sse in batch:
            data = sse.data.strip()
            if data == DONE:
                if native is None:
                    frames.append(DONE_FRAME)
                return True
            if not data:
                continue
            try:
                chunk = _decode.decode(sse.data)
            except msgspec.DecodeError:
                log.warning("request %s: skipped a malformed stream event after content", request_id)
                continue
            if not isinstance(chunk, dict):
                log.warning("request %s: skipped a non-object stream event", request_id)
                continue
            if sse.event == "error" or chunk.get("error"):
                err = chunk.get("error")
                message = err.get("message", "") if isinstance(err, dict) else str(err)
                etype = err.get("type") if isinstance(err, dict) else None
                raise _Broken(
                    FailureKind.SERVER_ERROR,
                    f"the upstream provider failed mid-stream: {clean(str(message))}",
                    "upstream_error",
                    etype if isinstance(etype, str) else None,
                )
            out = client_frame(sse.data, chunk)
            if out is not None:
                frames.append(out)
        return False

    def take_native(frames: list[bytes]) -> None:
        """Append the provider's events read so far (a native stream)."""
        assert native is not None
        sent = native.take()
        if sent:
            frames.append(sent)

    def end_frame() -> bytes:
        return DONE_FRAME if native is None else native.end_frame

    def broken_frame(broken: _Broken) -> bytes:
        if native is None:
            return error_frame(broken.error, code=broken.code)
        return native.error_frame(broken.error, broken.code, broken.error_type)

    # Each read's events go out in one write (the held frames with the events read with them):
    # never more than one send per upstream read, and never one held back for a later read.
    frames: list[bytes] = []
    try:
        while True:
            try:
                for data in stream.held:
                    held = _decode.decode(data)
                    if continuing and not is_content(held):
                        continue  # the continuation's role-only opening chunk
                    out = client_frame(data, held)
                    if out is not None:
                        frames.append(out)
                if native is not None:
                    take_native(frames)  # every event up to the commit point's read, its end included
                if stream.done:
                    if native is None:
                        frames.append(DONE_FRAME)
                    yield _taken(frames)
                    return
                batch: list[Any] | None = stream.pending
                while batch is not None:
                    if client_frames(batch, frames):
                        yield _taken(frames)
                        return
                    if frames:
                        yield _taken(frames)
                    batch = await _next_batch(stream, stall_timeout_s, tally)
                frames.append(end_frame())
                yield _taken(frames)
                return
            except _Broken as broken:
                kind, error = broken.kind, broken.error
                resumed = None
                if (
                    continuation is not None
                    and target is not None
                    and native is None
                    and not tally.tool_calls
                    and tally.text
                ):
                    if frames:
                        yield _taken(frames)  # what came before the break goes out before the continuation is sought
                    with anyio.CancelScope(shield=True):
                        await stream.aclose()
                        await finish(kind, tally.usage, error)
                    finished = True
                    log.warning("request %s: %s; continuing the stream", request_id, error)
                    resumed = await continuation.resume("".join(tally.text), target)
                if resumed is None or resumed.stream is None or resumed.finish is None:
                    frames.append(broken_frame(broken))  # after the frames before the break
                    yield _taken(frames)
                    return
                stream, finish = resumed.stream, resumed.finish
                target = resumed.records[-1].target if resumed.records else target
                tally.usage, delivered_before = Usage(), tally.content_deltas  # the next attempt's own usage
                kind, error, finished, continuing = FailureKind.SUCCESS, "", False, True
    except (asyncio.CancelledError, GeneratorExit):
        kind, error = FailureKind.CANCELLED, "client went away"
        raise
    finally:
        with anyio.CancelScope(shield=True):
            await stream.aclose()
            if not finished:
                await finish(kind, tally.usage, error)
