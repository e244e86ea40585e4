"""How long a Redis call may take while a client waits.

Owns: the one time bound on Redis calls on the request path (enqueue,
idempotency, result reads, limits, health reads). A socket timeout is not
that bound: redis-py's asyncio pool establishes connections under one lock,
so while Redis hangs (paused, a stuck connect) every command queues behind
the one connecting, each adding its own socket timeout. Callers wrap the
call in `asyncio.timeout(REQUEST_REDIS_TIMEOUT_S)`; the `TimeoutError` it
raises is an `OSError`, so the existing `(RedisError, OSError)` outage
handling answers it (503 `redis_unavailable` with `Retry-After`).

The bound is read once, when the process starts, from
`TURNOUT_REDIS_CALL_TIMEOUT_MS` (default 400 ms): a fleet whose Redis is
busy but healthy may give it more room before requests are refused.
Must not import: anything outside the standard library.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

CALL_TIMEOUT_ENV = "TURNOUT_REDIS_CALL_TIMEOUT_MS"
DEFAULT_CALL_TIMEOUT_MS = 400.0
MAX_CALL_TIMEOUT_MS = 60_000.0


def call_timeout_s(env: Mapping[str, str]) -> float:
    """The request path's Redis bound (seconds) from `TURNOUT_REDIS_CALL_TIMEOUT_MS` (ms) in `env`.

    Raises:
        ValueError: the value is not a number of milliseconds in (0, 60000], naming the variable.
    """
    raw = env.get(CALL_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_CALL_TIMEOUT_MS / 1000
    try:
        ms = float(raw)
    except ValueError:
        ms = float("nan")
    if not 0 < ms <= MAX_CALL_TIMEOUT_MS:  # also false for NaN
        raise ValueError(
            f"{CALL_TIMEOUT_ENV} must be a number of milliseconds in (0, {MAX_CALL_TIMEOUT_MS:.0f}], got {raw[:40]!r}"
        )
    return ms / 1000


REQUEST_REDIS_TIMEOUT_S = call_timeout_s(os.environ)
"""Longest wait for one Redis call on the request path (seconds)."""

RECORD_TIMEOUT_S = max(1.0, REQUEST_REDIS_TIMEOUT_S)
"""Longest a result's recording (or a permit's release) may take (seconds):
a committed stream's end waits for it, so a hung store must not hold the
client; past it the result is dropped and logged."""
