"""Backoff: how long to wait before a retry of the same target.

Owns: the full-jitter delay formula and the rule that merges a provider's
rate-limit hint with it (SPEC §3 "Backoff").
Must not import: anything outside the standard library and `turnout.core`;
randomness is a `random.Random` passed in, never the global one.
"""

from __future__ import annotations

import enum
import random

import msgspec

from turnout.core.policy import BASE_MS_RANGE, NO_BACKOFF, RetryPolicy


def full_jitter_s(retry_number: int, base_ms: int, max_ms: int, rng: random.Random) -> float:
    """Full-jitter delay for the n-th retry of a target, in seconds.

    Formula (SPEC §3): `uniform(0, min(max_ms, base_ms · 2ⁿ))`, with `base_ms`
    clamped to 250–60 000 ms first, but for a `base_ms` of 0: no backoff (`NO_BACKOFF`).

    Args:
        retry_number: n, counted from 0 for the first retry of a target.
            Negative values are treated as 0.
        base_ms: base delay in ms.
        max_ms: cap of the delay in ms (values below `base_ms` cap at it).
        rng: the random source (seed it in tests).

    Returns:
        The delay in seconds, in `[0, min(max_ms, base_ms · 2ⁿ) / 1000]`.
    """
    if base_ms == NO_BACKOFF:
        return 0.0
    base = min(max(base_ms, BASE_MS_RANGE[0]), BASE_MS_RANGE[1])
    exponent = min(max(retry_number, 0), 32)  # 2**32 · 250 ms already dwarfs any cap
    ceiling_ms = min(max(max_ms, 0), base * (2**exponent))
    return rng.uniform(0.0, ceiling_ms) / 1000.0


class DelaySource(enum.StrEnum):
    """Why a retry waits as long as it does (recorded on the attempt)."""

    BACKOFF = "backoff"  # full jitter
    RETRY_AFTER = "retry_after"  # the provider's hint


class RetryDelay(msgspec.Struct, frozen=True, kw_only=True):
    """The wait before a retry, or the verdict that waiting is not worth it.

    Attributes:
        delay_s: seconds to wait before the retry (0 when `fall_back_now`).
        source: where the delay came from.
        fall_back_now: True when the provider asked for a longer wait than
            `max_ms` or the time left: do not wait, fall back now (SPEC §3).
    """

    delay_s: float
    source: DelaySource
    fall_back_now: bool = False


def retry_delay(
    policy: RetryPolicy,
    retry_number: int,
    retry_after_s: float | None,
    time_left_s: float,
    rng: random.Random,
) -> RetryDelay:
    """Decide the wait before a retry (SPEC §3 "Backoff").

    Args:
        policy: the retry policy in force.
        retry_number: n, 0 for the first retry of this target.
        retry_after_s: the hint from the response being retried (seconds), or
            None. Used only with `respect_retry_after`.
        time_left_s: seconds until the budget's deadline.
        rng: random source for the jitter.

    Returns:
        A `RetryDelay`. A hint longer than `max_ms` or than the time left sets
        `fall_back_now`; otherwise the hint replaces the computed delay. The
        caller still checks that the retry starts before the deadline.
    """
    if policy.respect_retry_after and retry_after_s is not None and retry_after_s >= 0:
        if retry_after_s * 1000.0 > policy.max_ms or retry_after_s >= time_left_s:
            return RetryDelay(delay_s=0.0, source=DelaySource.RETRY_AFTER, fall_back_now=True)
        return RetryDelay(delay_s=retry_after_s, source=DelaySource.RETRY_AFTER)
    return RetryDelay(
        delay_s=full_jitter_s(retry_number, policy.base_ms, policy.max_ms, rng), source=DelaySource.BACKOFF
    )
