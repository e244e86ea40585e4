"""The connection-level faults of a step, the same on every non-OpenAI route.

Owns: `pause` (a wait that notices a departed client), `socket_fault` (`reset`, `close`,
`hang` before any response byte), `held_body` (`slow`, `cut`, `stall` of a complete JSON
answer: the body late, cut at its half, or stopped at its half with the connection held) and
`cut_or_stall` (a stream's end after its N-th content event), each
recording how the attempt ended; the Anthropic and Bedrock handlers share them.
Must not import: turnout's gateway packages.
"""

from __future__ import annotations

from aiohttp import web

from turnout_sim import connection
from turnout_sim.attempt_log import Attempt, End
from turnout_sim.openai_steps import Env
from turnout_sim.scenarios import Step, StepKind

SOCKET_FAULTS = frozenset({StepKind.RESET, StepKind.CLOSE, StepKind.HANG})
"""Steps that end the connection before any response byte."""
HELD_BODIES = frozenset({StepKind.SLOW, StepKind.CUT, StepKind.STALL})
"""Steps `held_body` writes."""


async def pause(request: web.Request, attempt: Attempt, env: Env, seconds: float) -> bool:
    """Wait `seconds`; False (the attempt ended `client_gone`) when the client left meanwhile."""
    if await connection.pause(request, seconds):
        return True
    attempt.finish(End.CLIENT_GONE, env.clock())
    return False


async def socket_fault(request: web.Request, kind: StepKind, attempt: Attempt, env: Env) -> web.Response:
    """Apply `reset`, `close` or `hang` (`kind` in `SOCKET_FAULTS`) and record the end."""
    if kind is StepKind.RESET:
        connection.reset(request)
        attempt.finish(End.FAULT, env.clock())
    elif kind is StepKind.CLOSE:
        connection.close(request)
        attempt.finish(End.FAULT, env.clock())
    else:
        left = await connection.wait_for_disconnect(request, env.stopping)
        attempt.finish(End.CLIENT_GONE if left else End.FAULT, env.clock())
    return web.Response()


async def held_body(
    request: web.Request, body: bytes, step: Step, attempt: Attempt, env: Env, headers: dict[str, str] | None = None
) -> web.StreamResponse:
    """Write a complete JSON answer `body` as `step` (in `HELD_BODIES`) says: after `delay_ms`
    (`slow`), or its first half then a closed (`cut`) or held (`stall`) connection."""
    resp = web.StreamResponse(status=200, headers=headers)
    resp.content_type = "application/json"
    resp.content_length = len(body)
    await resp.prepare(request)
    if step.kind is StepKind.SLOW:
        if await pause(request, attempt, env, (step.delay_ms or 0) / 1000):
            await resp.write(body)
            await resp.write_eof()
        return resp
    await resp.write(body[: len(body) // 2])
    if step.kind is StepKind.CUT:
        connection.close(request)
        attempt.finish(End.FAULT, env.clock())
    else:
        attempt.finish(
            End.CLIENT_GONE if await connection.wait_for_disconnect(request, env.stopping) else End.FAULT, env.clock()
        )
    return resp


async def cut_or_stall(request: web.Request, kind: StepKind, attempt: Attempt, env: Env) -> bool:
    """End a stream at its `cut` (connection closed) or `stall` (held until the client leaves or
    the server stops); True when `kind` was one of them (the attempt's end recorded)."""
    if kind is StepKind.CUT:
        connection.close(request)
        attempt.finish(End.FAULT, env.clock())
        return True
    if kind is StepKind.STALL:
        left = await connection.wait_for_disconnect(request, env.stopping)
        attempt.finish(End.CLIENT_GONE if left else End.FAULT, env.clock())
        return True
    return False
