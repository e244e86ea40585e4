"""Is the ingress that queued a job still there to answer its client? (issue 41, build item 3).

Owns: the rule that decides whether a worker runs a queued job whose ingress may be gone, and the
numbers of the ingress's liveness lease. Each ingress keeps a lease in Redis (its reply channel ->
until when, Redis `TIME` ms), renewed every `INGRESS_RENEW_S` for `INGRESS_LEASE_MS`
(`turnout.state.jobs.liveness`). An ingress is gone when its lease ran out AND nobody listens on
its reply channel (`PUBSUB NUMSUB`: Redis drops a killed process's subscription at once): an
ingress whose event loop lagged past its lease still listens, one whose listener reconnects still
renews. An ingress without a lease (one of the previous version, or not seen yet) is taken as
there. A gone ingress's jobs are withdrawn unrun, except keyed ones (`Idempotency-Key`), which
run to their end: their stored answer serves the client's retry through another ingress.
Must not import: anything outside the standard library.
"""

from __future__ import annotations

INGRESS_LEASE_MS = 1500
"""Life of an ingress's liveness lease (ms, Redis `TIME`)."""

INGRESS_RENEW_S = 1.0
"""How often an ingress renews its lease (seconds). A renewal late past the lease leaves it out a
moment, never gone: the ingress still listens on its reply channel (`ingress_gone`)."""

WATCH_EVERY_S = 0.75
"""How often a worker reads the leases (seconds): a killed ingress is known gone within
`INGRESS_LEASE_MS` + this. Not faster: each read is a command that lands inside requests' windows
(`tests/integration/test_redis_commands.py` counts them)."""

FORGET_AFTER_MS = 3_600_000
"""A lease past for this long (ms) is deleted by the watch that sees it (the hash stays small)."""


def lease_out(lease_until_ms: int | None, now_ms: int) -> bool:
    """Whether an ingress's lease ran out: `now_ms > lease_until_ms` (Redis `TIME` ms); False with no lease."""
    return lease_until_ms is not None and now_ms > lease_until_ms


def ingress_gone(lease_until_ms: int | None, now_ms: int, listeners: int) -> bool:
    """Whether the ingress of a job is gone: its lease ran out (`lease_out`) and `listeners`
    (subscribers of its reply channel, `PUBSUB NUMSUB`) is 0. No lease: not gone (an ingress of
    the previous version keeps none)."""
    return lease_out(lease_until_ms, now_ms) and listeners <= 0


def may_run(keyed: bool, ingress_gone: bool) -> bool:
    """Whether a worker runs (or goes on with) a job: always when keyed (`Idempotency-Key`: its
    answer serves the client's retry), else only while its ingress is there."""
    return keyed or not ingress_gone


def forget(lease_until_ms: int, now_ms: int) -> bool:
    """Whether a past lease is deleted: past by more than `FORGET_AFTER_MS`."""
    return now_ms - lease_until_ms > FORGET_AFTER_MS
