"""Is the ingress that queued a job still there to answer its client? (issue 41, build item 3).

Owns: the rule that decides whether a worker runs a queued job whose ingress may be gone, and the
numbers of the ingress's liveness lease. Each ingress keeps a lease in Redis (its reply channel ->
until when, Redis `TIME` ms), renewed every `INGRESS_RENEW_S` for `INGRESS_LEASE_MS`
(`turnout.state.jobs.liveness`). An ingress is gone when its lease ran out AND nobody listens on
its reply channel (`PUBSUB NUMSUB`: Redis drops a killed process's subscription at once): an
ingress whose event loop lagged past its lease still listens, one whose listener reconnects still
renews. An ingress without a lease (one of the previous version, or not seen yet) is taken as
there. Nor is an ingress gone during `BACK_GRACE_MS` after the worker's view of Redis was cut (a
failed read, or a read long after the last: a Redis failover, a restart, a network blip): every
ingress lost Redis too and could neither renew nor listen; each renews within that time once back. A gone ingress's jobs are withdrawn unrun, except keyed ones (`Idempotency-Key`), which
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

BACK_GRACE_MS = INGRESS_LEASE_MS + int(INGRESS_RENEW_S * 1000)
"""How long after Redis answers a worker again (ms, Redis `TIME`) no ingress is taken as gone: one
lease and one renewal period, so an ingress that lost Redis with the worker renews first."""

CUT_GAP_MS = int(WATCH_EVERY_S * 1000) + INGRESS_LEASE_MS
"""Two successful reads further apart than this (ms, Redis `TIME`) mean the worker's view was cut
between them (its loop stalled, or Redis was out between two reads)."""

FORGET_AFTER_MS = 3_600_000
"""A lease past for this long (ms) is deleted by the watch that sees it (the hash stays small)."""


def lease_out(lease_until_ms: int | None, now_ms: int) -> bool:
    """Whether an ingress's lease ran out: `now_ms > lease_until_ms` (Redis `TIME` ms); False with no lease."""
    return lease_until_ms is not None and now_ms > lease_until_ms


def ingress_gone(lease_until_ms: int | None, now_ms: int, listeners: int, back_ms: int | None = None) -> bool:
    """Whether the ingress of a job is gone: its lease ran out (`lease_out`) and `listeners`
    (subscribers of its reply channel, `PUBSUB NUMSUB`) is 0. No lease: not gone (an ingress of
    the previous version keeps none). Never gone within `BACK_GRACE_MS` after `back_ms` (Redis
    `TIME` ms when the worker's view of Redis came back after a cut; None: never cut)."""
    if back_ms is not None and now_ms - back_ms < BACK_GRACE_MS:
        return False
    return lease_out(lease_until_ms, now_ms) and listeners <= 0


def view_came_back(failed: bool, last_ok_ms: int | None, now_ms: int) -> bool:
    """Whether a worker's read at `now_ms` ends a cut in its view of Redis: the read before it
    `failed`, or the last successful one (`last_ok_ms`) is more than `CUT_GAP_MS` ago."""
    return failed or (last_ok_ms is not None and now_ms - last_ok_ms > CUT_GAP_MS)


def may_run(keyed: bool, ingress_gone: bool) -> bool:
    """Whether a worker runs (or goes on with) a job: always when keyed (`Idempotency-Key`: its
    answer serves the client's retry), else only while its ingress is there."""
    return keyed or not ingress_gone


def forget(lease_until_ms: int, now_ms: int) -> bool:
    """Whether a past lease is deleted: past by more than `FORGET_AFTER_MS`."""
    return now_ms - lease_until_ms > FORGET_AFTER_MS
