"""A paid answer that could not be delivered: keep it, retry, or let it go; and a claimed job's lease.

Owns: the rules a worker follows when it holds an upstream answer but cannot reach Redis
(issue 41, build item 2): an answer is kept in memory while the worker holds fewer than
`max_answers` kept answers of at most `max_bytes` in all, and retried every
`retry_delay_s` until it is delivered or `keep_s` have passed since the first failure; and
the life of a claimed job's lease (build item 7): short (`START_LEASE_S`) until the job's
first upstream call, so a stalled worker's claimed jobs go to another worker within about a
second, the full lease after it, so a paused worker's paid call is not made again.
Must not import: anything outside the standard library.
"""

from __future__ import annotations

KEEP_S = 120.0
"""Longest a kept answer is retried (seconds since its first failed delivery); past it the answer
is let go (its client was answered 503 `no_worker` at its deadline, a keyed retry runs again)."""

KEEP_MAX_BYTES = 64 * 1024 * 1024
"""Most bytes of kept answers one worker holds (64 MiB); an answer past it is not kept."""

RETRY_MIN_S = 0.05
"""First wait before a kept answer's next delivery (seconds)."""

RETRY_MAX_S = 0.5
"""Longest wait between two deliveries of a kept answer (seconds): once the link is back the answer
goes within this (plus one Redis round trip)."""

START_LEASE_S = 1.0
"""Life of the lease of a job claimed but not started (seconds): no upstream call made yet. Renewed
every `START_RENEW_S` while its worker runs; a stalled worker's (SIGSTOP, a long GC pause) lapses
within it and another worker's scan (every `poll_delay`) claims the job."""

START_RENEW_S = 0.25
"""How often the leases of claimed, not started jobs are renewed (seconds)."""

LEASE_MARGIN_S = 0.1
"""Time a worker keeps between its own count of a lease's end and Redis's (seconds; `lease_held`)."""


def may_keep(
    kept_answers: int, kept_bytes: int, size: int, *, max_answers: int, max_bytes: int = KEEP_MAX_BYTES
) -> bool:
    """Whether a worker keeps one more undelivered answer of `size` bytes.

    Args:
        kept_answers: answers the worker keeps now (>= 0).
        kept_bytes: their size in all (bytes, >= 0).
        size: the new answer's size (bytes, >= 0).
        max_answers: most answers kept at once (the worker's slots: a kept answer holds its slot).
        max_bytes: most bytes kept at once.

    Returns:
        True when both bounds still hold with the answer added.
    """
    return kept_answers + 1 <= max_answers and kept_bytes + size <= max_bytes


def retry_delay_s(failures: int) -> float:
    """Wait before the next delivery of a kept answer after `failures` failed ones (seconds):
    `RETRY_MIN_S · 2^(failures-1)`, capped at `RETRY_MAX_S`; never negative, never above the cap."""
    exponent = min(max(failures - 1, 0), 16)
    return min(RETRY_MIN_S * float(2**exponent), RETRY_MAX_S)


def still_kept(first_failure_s: float, now_s: float, keep_s: float = KEEP_S) -> bool:
    """Whether a kept answer is retried again: `now_s - first_failure_s < keep_s` (monotonic seconds)."""
    return now_s - first_failure_s < keep_s


def lease_held(started: bool, renewed_s: float, now_s: float, full_lease_s: float) -> bool:
    """Whether a worker may still count on its lease of a job: renewed (or claimed) at `renewed_s`,
    it lives `lease_ms(started, full_lease_s)` from then, less `LEASE_MARGIN_S` (monotonic seconds).
    A worker that stalled past it (SIGSTOP, a long pause, Redis out of reach) gives the job up
    unrun: another worker may hold it now."""
    return now_s - renewed_s < lease_ms(started, full_lease_s) / 1000 - LEASE_MARGIN_S


def lease_ms(started: bool, full_lease_s: float) -> int:
    """The lease (ms) to renew a claimed job with: `full_lease_s` once its first upstream call was
    made (or an answer waits to be delivered), else `START_LEASE_S` (never more than the full one)."""
    return int((full_lease_s if started else min(START_LEASE_S, full_lease_s)) * 1000)


class ClaimClock:
    """When, on this process's monotonic clock, Redis ran a claim whose reply carried Redis `TIME`.

    A reply read late (the worker stalled, SIGSTOP, with the reply waiting in its socket) must
    not count as a fresh claim: its start lease may already be past. Each reply carrying Redis
    `TIME` (every pick, claimed or not, about once a second while idle) is a sample of
    `local - redis` (seconds); the smallest of the last `samples` is the offset with the least
    delay, and a claim ran at `redis + offset`, never later than its reply's reading.
    Pure: the caller passes both clocks (no I/O, no clock read).

    Args:
        samples: how many recent samples are kept (>= 1).
    """

    def __init__(self, samples: int = 64) -> None:
        self._samples: list[float] = []
        self._keep = max(1, samples)

    def claimed_at_s(self, redis_ms: int, local_s: float) -> float:
        """Record a reply (Redis `TIME` `redis_ms`, epoch ms, read at monotonic `local_s`) and return
        the monotonic second its claim ran at: `min(local_s, redis_ms / 1000 + smallest offset)`."""
        offset = local_s - redis_ms / 1000
        self._samples.append(offset)
        del self._samples[: -self._keep]
        return min(local_s, redis_ms / 1000 + min(self._samples))
