"""How long a Redis call may take while a client waits.

Owns: the one time bound on Redis calls on the request path (enqueue,
idempotency, result reads, limits, health reads). A socket timeout is not
that bound: redis-py's asyncio pool establishes connections under one lock,
so while Redis hangs (paused, a stuck connect) every command queues behind
the one connecting, each adding its own socket timeout. Callers wrap the
call in `asyncio.timeout(REQUEST_REDIS_TIMEOUT_S)` and treat the
`TimeoutError` it raises like a store's `StateUnavailable` (503
`redis_unavailable` with `Retry-After`, or the caller's outage policy).
Must not import: anything outside the standard library.
"""

REQUEST_REDIS_TIMEOUT_S = 0.4
"""Longest wait for one Redis call on the request path (seconds)."""
