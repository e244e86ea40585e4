"""The fleet's rolling speed averages of each target (SPEC §10: measured by the fleet from its own attempts).

Owns: turning one attempt's measures into a sample of the rolling averages (its
weight and lifetime), and folding a sample in on its own when no breaker write
carries it (`turnout.health.results` folds it into the write when there is one).
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

import asyncio

from turnout.health.outage import OutagePolicy
from turnout.state.bounds import REQUEST_REDIS_TIMEOUT_S
from turnout.state.breaker_store import BreakerStore, Speed, SpeedSample
from turnout.state.errors import StateUnavailable


class SpeedAverages:
    """Rolling averages of time to first token and output rate.

    Args:
        store: where the averages live.
        outage: the store-outage policy (a lost sample never refuses anything).
        alpha: the weight of a new sample (`routing.speed_alpha`, 0-1).
        ttl_s: seconds a target's averages live without a new sample (`routing.speed_ttl_s`).
    """

    def __init__(self, store: BreakerStore, outage: OutagePolicy, *, alpha: float = 0.2, ttl_s: int = 3600) -> None:
        self._store = store
        self._outage = outage
        self._alpha = alpha
        self._ttl_s = ttl_s

    def sample(self, measures: Speed | None) -> SpeedSample | None:
        """The sample of `measures` to fold in, or None when they measure nothing."""
        if measures is None or (measures.ttft_ms is None and measures.tokens_per_s is None):
            return None
        return SpeedSample(
            ttft_ms=measures.ttft_ms, tokens_per_s=measures.tokens_per_s, alpha=self._alpha, ttl_s=self._ttl_s
        )

    async def record(self, target: str, *, ttft_ms: float | None, tokens_per_s: float | None) -> None:
        """Fold one successful attempt's measures into the target's rolling averages.

        Args:
            target: the target key.
            ttft_ms: time to first token of a stream, or the whole JSON
                answer, in milliseconds; None leaves the average alone.
            tokens_per_s: completion tokens per second; None leaves it alone.

        A store outage drops the sample (logged; never refuses anything).
        """
        if ttft_ms is None and tokens_per_s is None:
            return
        try:
            async with asyncio.timeout(REQUEST_REDIS_TIMEOUT_S):
                await self._store.record_speed(
                    target, ttft_ms=ttft_ms, tokens_per_s=tokens_per_s, alpha=self._alpha, ttl_s=self._ttl_s
                )
        except (StateUnavailable, TimeoutError) as exc:
            self._outage(exc, refuse=False)
