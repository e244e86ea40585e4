"""Writing a streamed success answer frame by frame, under the step's faults.

Owns: the mid-stream faults every streaming route shares — `slow<ms>`
(a wait before the first content frame), `i<N>` (N ms between content
frames), `cut<N>` (the connection closed after N content frames),
`stall<N>` (held open after N content frames), `badchunk<N>` (content
frame N replaced by a malformed one) and `nodone` (the last frame, the
stream's terminator, left out and the connection closed) — over a list of
frames the route built. A route decides which of its frames carry content
(chat's text or argument chunks, a Responses `*.delta` event).
Must not import: any route's wire module; frames arrive as bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aiohttp import web

from turnout_sim.attempt_log import Attempt
from turnout_sim.openai_steps import Env, fault_close, hold, pause
from turnout_sim.scenarios import Step, StepKind


@dataclass(frozen=True, slots=True)
class Frame:
    """One SSE event as bytes, and whether it carries content.

    Attributes:
        data: the event's bytes, framing included (`data: ...\\n\\n`).
        content: True for frames counted by `cut<N>`, `stall<N>`,
            `badchunk<N>` and spaced by `i<N>`.
    """

    data: bytes
    content: bool = False


def _cut_index(frames: Sequence[Frame], count: int) -> int:
    """Frames sent before `cut<count>` / `stall<count>` acts: all up to the
    count-th content frame (or the last one, when there are fewer), or all
    before the first content frame for a count of 0."""
    positions = [i for i, frame in enumerate(frames) if frame.content]
    if not positions:
        return len(frames)
    if count == 0:
        return positions[0]
    return positions[min(count, len(positions)) - 1] + 1


async def write(
    request: web.Request,
    resp: web.StreamResponse,
    frames: Sequence[Frame],
    step: Step,
    attempt: Attempt,
    env: Env,
    *,
    terminator: bytes | None,
    malformed: bytes,
) -> web.StreamResponse:
    """Write `frames` (then `terminator`) on a prepared SSE response, applying `step`.

    Args:
        request: the request being answered.
        resp: the prepared streaming response (`nodone` callers set
            `force_close` before preparing it).
        frames: every frame of the full answer, in order.
        step: the step the request consumed (its faults are applied here).
        attempt: its log entry (ends recorded here for faults and departed
            clients).
        env: handler environment.
        terminator: the stream's last frame (`data: [DONE]`, or a final
            event), left out under `nodone`; None when the route has none
            besides `frames`.
        malformed: the frame `badchunk<N>` sends in place of content frame N.

    Returns:
        `resp`: completed, or left to the fault that ended the connection.

    Raises:
        ConnectionError: the client left during a write (the caller records
            it as `client_gone`).
    """
    kind = step.kind
    stop = _cut_index(frames, step.count or 0) if kind in (StepKind.CUT, StepKind.STALL) else len(frames)
    sent_content = 0
    for frame in frames[:stop]:
        if frame.content:
            wait_ms = (step.delay_ms or 0) if sent_content == 0 and kind is StepKind.SLOW else 0
            if sent_content and step.interval_ms:
                wait_ms = step.interval_ms
            # A pause notices a departed client within one interval (a write to
            # its closed transport raises ConnectionError in any case).
            if wait_ms and not await pause(request, attempt, env, wait_ms / 1000):
                return resp
            sent_content += 1
            if kind is StepKind.BAD_CHUNK and sent_content == step.count:
                await resp.write(malformed)
                continue
        await resp.write(frame.data)
    if kind is StepKind.CUT:
        fault_close(request, attempt, env)
        return resp
    if kind is StepKind.STALL:
        await hold(request, attempt, env)
        return resp
    if terminator is not None and kind is not StepKind.NO_DONE:
        await resp.write(terminator)
    await resp.write_eof()
    return resp


def open_stream(env_headers: dict[str, str], step: Step) -> web.StreamResponse:
    """An unprepared `text/event-stream` response (chunked, no-cache); closed
    after the body under `nodone`, as a provider that drops the connection."""
    resp = web.StreamResponse(status=200, headers=env_headers | {"cache-control": "no-cache"})
    resp.content_type = "text/event-stream"
    resp.charset = "utf-8"
    resp.enable_chunked_encoding()
    if step.kind is StepKind.NO_DONE:
        resp.force_close()
    return resp
