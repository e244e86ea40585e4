"""An enqueue that waits for its write to reach a replica (`WAIT`), so a failover keeps the job.

Owns: `ReplicaWait` (how many replicas, how long) and `run_then_wait` (a script, then `WAIT` on the
same connection, in one round trip).

Why: Redis replicates asynchronously. A primary that dies just after it answered an enqueue may not
have sent that write to its replica yet; the replica promoted in its place (Redis Sentinel, a
managed Redis) then has no such job, and its client is answered 503 `job_lost`. Redis's `WAIT
numreplicas timeout` blocks the connection that wrote until that many replicas acknowledged every
write it made, or the timeout passes; it answers how many did. The job is accepted either way (a
timeout only bounds the wait: a fleet whose replica is down keeps serving); fewer acknowledgements
than asked are logged (at most once per `SHORT_LOG_EVERY_S`). Cost: the replica's round trip on
every queued request, and the whole timeout while no replica is attached (README "Redis failover").
Must not import: services, FastAPI, httpx, arq.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

log = logging.getLogger("turnout.queue")

SHORT_LOG_EVERY_S = 10.0
"""Least time between two warnings that a replica did not acknowledge an enqueue in time (seconds)."""


@dataclasses.dataclass(frozen=True)
class ReplicaWait:
    """`WAIT replicas timeout_ms` after each enqueue.

    Attributes:
        replicas: replicas that must acknowledge the write (>= 1).
        timeout_ms: longest the enqueue waits for them (ms, >= 1; Redis's 0, forever, is not allowed).
    """

    replicas: int
    timeout_ms: int

    @classmethod
    def of(cls, replicas: int, timeout_ms: int) -> ReplicaWait | None:
        """The wait for `replicas` (0: None, no wait) within `timeout_ms` (the settings'
        `enqueue_wait_replicas` / `enqueue_wait_ms`)."""
        return cls(replicas, max(1, timeout_ms)) if replicas > 0 else None


class _Shortfall:
    """When the last shortfall warning was logged (monotonic seconds)."""

    last_s = -SHORT_LOG_EVERY_S


async def run_then_wait(
    client: Redis, script: AsyncScript, keys: Sequence[Any], args: Sequence[Any], wait: ReplicaWait
) -> Any:
    """Run `script`, then `WAIT` on the same connection; the script's reply.

    One round trip (a pipeline without MULTI: `WAIT` must follow the write on its connection). The
    script goes by its text (`EVAL`, which Redis caches by its digest), not its digest alone: a
    primary that does not know it yet (a replica just promoted) would answer `NOSCRIPT` while the
    `WAIT` sent with it still held the connection for its whole timeout.

    Raises:
        One of `turnout.state.errors.STATE_ERRORS`: Redis unreachable or failed (the caller maps them).
    """
    async with client.pipeline(transaction=False) as pipe:
        text = script.script if isinstance(script.script, str) else bytes(script.script).decode()
        pipe.eval(text, len(keys), *keys, *args)
        pipe.execute_command("WAIT", wait.replicas, wait.timeout_ms)
        reply, acked = await pipe.execute()
    if int(acked) < wait.replicas:
        _short(int(acked), wait)
    return reply


def _short(acked: int, wait: ReplicaWait) -> None:
    now = time.monotonic()
    if now - _Shortfall.last_s >= SHORT_LOG_EVERY_S:
        _Shortfall.last_s = now
        log.warning(
            "an enqueue reached %d of %d replicas within %d ms (the job is accepted; a failover now may lose it)",
            acked,
            wait.replicas,
            wait.timeout_ms,
        )
