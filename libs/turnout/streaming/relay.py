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
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

import anyio
import msgspec

from turnout.adapters.base import NativeFrames, UpstreamStream, Usage
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
Scrub = Callable[[str], str]

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


class _Frames:
    """The client's side of one relayed answer: its frames as the client asked for them (or a
    native stream's own events), those read but not yet written (`pending`), and what the
    relay learnt from the chunks (`tally`), across continuations.

    Args:
        native: the native stream's event gatherer, or None (the client gets OpenAI chunks).
        include_usage: the client asked for the usage chunk.
        request_id: for log lines.
        clean: the egress scrubber's text function.
    """

    def __init__(self, native: NativeFrames | None, include_usage: bool, request_id: str, clean: Scrub) -> None:
        self.tally = _Tally()
        self.native = native
        self.pending: list[bytes] = []
        self._include_usage = include_usage
        self._request_id = request_id
        self._clean = clean
        self._continuing = False
        self._delivered_before = 0  # content deltas the client had when the latest continuation began

    def continued(self) -> None:
        """A continuation's stream follows: its chunks carry the first stream's id and the whole answer's usage."""
        self.tally.usage, self._delivered_before = Usage(), self.tally.content_deltas  # the next attempt's own usage
        self._continuing = True

    def may_continue(self) -> bool:
        """Whether a broken stream may be continued: a text answer begun, no tool call, not native."""
        return self.native is None and not self.tally.tool_calls and bool(self.tally.text)

    def chunk(self, data: str, chunk: dict[str, Any]) -> bytes | None:
        """The client's frame for one upstream chunk, or None (usage-only and not asked, or native)."""
        usage_only = self.tally.see(chunk)
        if self.native is not None or usage_only and not self._include_usage:
            return None  # a native stream's client gets the provider's events (`take_native`)
        if not self._continuing:
            return _client_frame(data, chunk, self._include_usage)
        if self.tally.chunk_id is not None:
            chunk["id"] = self.tally.chunk_id  # one seamless answer: the first stream's id throughout
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            whole = whole_answer_usage(self.tally.usage, self._delivered_before)
            chunk["usage"] = {
                **usage,
                "prompt_tokens": whole.input_tokens,
                "completion_tokens": whole.output_tokens,
                "total_tokens": whole.input_tokens + whole.output_tokens,
            }
        return _client_frame(_encode.encode(chunk).decode(), chunk, self._include_usage)

    def held(self, stream: UpstreamStream) -> None:
        """Add the frames of the events held up to the commit point (a continuation's role-only opening left out)."""
        for data in stream.held:
            held = _decode.decode(data)
            if self._continuing and not is_content(held):
                continue  # the continuation's role-only opening chunk
            out = self.chunk(data, held)
            if out is not None:
                self.pending.append(out)
        if self.native is not None:
            self.take_native()  # every event up to the commit point's read, its end included

    def batch(self, batch: list[Any]) -> bool:
        """Add the client's frames for one read's events; True at the end of the stream.

        Raises `_Broken` at an upstream error event, with the frames before it added.
        """
        if self.native is not None:
            self.take_native()
        for sse in batch:
            data = sse.data.strip()
            if data == DONE:
                if self.native is None:
                    self.pending.append(DONE_FRAME)
                return True
            if not data:
                continue
            try:
                chunk = _decode.decode(sse.data)
            except msgspec.DecodeError:
                log.warning("request %s: skipped a malformed stream event after content", self._request_id)
                continue
            if not isinstance(chunk, dict):
                log.warning("request %s: skipped a non-object stream event", self._request_id)
                continue
            if sse.event == "error" or chunk.get("error"):
                raise self._upstream_error(chunk.get("error"))
            out = self.chunk(sse.data, chunk)
            if out is not None:
                self.pending.append(out)
        return False

    def _upstream_error(self, err: Any) -> _Broken:
        """The break an upstream error event stands for (its text scrubbed, its type kept)."""
        message = err.get("message", "") if isinstance(err, dict) else str(err)
        etype = err.get("type") if isinstance(err, dict) else None
        return _Broken(
            FailureKind.SERVER_ERROR,
            f"the upstream provider failed mid-stream: {self._clean(str(message))}",
            "upstream_error",
            etype if isinstance(etype, str) else None,
        )

    def take_native(self) -> None:
        """Add the provider's events read so far (a native stream)."""
        assert self.native is not None
        sent = self.native.take()
        if sent:
            self.pending.append(sent)

    def end_frame(self) -> bytes:
        """The normal end of the stream."""
        return DONE_FRAME if self.native is None else self.native.end_frame

    def broken_frame(self, broken: _Broken) -> bytes:
        """The final event of a broken stream."""
        if self.native is None:
            return error_frame(broken.error, code=broken.code)
        return self.native.error_frame(broken.error, broken.code, broken.error_type)

    def take(self) -> bytes:
        """The pending frames as one write (`_taken`)."""
        return _taken(self.pending)


async def _writes(stream: UpstreamStream, out: _Frames, stall_timeout_s: float | None) -> AsyncGenerator[bytes]:
    """The client's writes of one upstream stream, up to its end; raises `_Broken` when it breaks.

    Each read's events go out in one write (the held frames with the events read with them):
    never more than one send per upstream read, and never one held back for a later read.
    """
    out.held(stream)
    if stream.done:
        if out.native is None:
            out.pending.append(DONE_FRAME)
        yield out.take()
        return
    batch: list[Any] | None = stream.pending
    while batch is not None:
        if out.batch(batch):
            yield out.take()
            return
        if out.pending:
            yield out.take()
        batch = await _next_batch(stream, stall_timeout_s, out.tally)
    out.pending.append(out.end_frame())
    yield out.take()


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
    out = _Frames(stream.native, include_usage, request_id, scrub or Scrubber().text)
    kind, error = FailureKind.SUCCESS, ""
    finished = False
    try:
        while True:
            try:
                async with aclosing(_writes(stream, out, stall_timeout_s)) as writes:
                    async for write in writes:
                        yield write
                return
            except _Broken as broken:
                kind, error = broken.kind, broken.error
                resumed = None
                if continuation is not None and target is not None and out.may_continue():
                    if out.pending:
                        yield out.take()  # what came before the break goes out before the continuation is sought
                    with anyio.CancelScope(shield=True):
                        await stream.aclose()
                        await finish(kind, out.tally.usage, error)
                    finished = True
                    log.warning("request %s: %s; continuing the stream", request_id, error)
                    resumed = await continuation.resume("".join(out.tally.text), target)
                if resumed is None or resumed.stream is None or resumed.finish is None:
                    out.pending.append(out.broken_frame(broken))  # after the frames before the break
                    yield out.take()
                    return
                stream, finish = resumed.stream, resumed.finish
                target = resumed.records[-1].target if resumed.records else target
                out.continued()
                kind, error, finished = FailureKind.SUCCESS, "", False
    except (asyncio.CancelledError, GeneratorExit):
        kind, error = FailureKind.CANCELLED, "client went away"
        raise
    finally:
        with anyio.CancelScope(shield=True):
            await stream.aclose()
            if not finished:
                await finish(kind, out.tally.usage, error)
