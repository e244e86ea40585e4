"""A fake clock for tests: time moves only when the code under test sleeps.

Unit tests never read the real clock nor wait on the scheduler; a test that
did failed now and then under load (a full-jitter backoff of a few
milliseconds had already elapsed on a busy machine, so the router skipped
the wait). `FakeClock` gives a router, its breakers and their store one
seconds counter, advanced by the injected `sleep`.
"""

from __future__ import annotations

import random

from turnout.catalog import Catalog
from turnout.core.breaker import BreakerSettings
from turnout.health import Breakers
from turnout.state.breaker_store import MemoryBreakerStore


class FakeClock:
    """Seconds that advance only through `sleep`.

    Args:
        start_s: the first reading, seconds.
    """

    def __init__(self, start_s: float = 1000.0) -> None:
        self.now_s = start_s
        self.waits: list[float] = []

    def __call__(self) -> float:
        """The current reading, seconds (usable as a monotonic or an epoch clock)."""
        return self.now_s

    async def sleep(self, delay_s: float) -> None:
        """Record the wait and advance the clock by `delay_s` seconds, without waiting."""
        self.waits.append(delay_s)
        self.now_s += max(delay_s, 0.0)

    def breakers(self, catalog: Catalog, seed: int = 17) -> Breakers:
        """In-memory breakers whose store and views read this clock; seeded draws."""
        return Breakers.over(
            MemoryBreakerStore(clock=self),
            BreakerSettings(),
            sole_targets=catalog.sole_targets,
            clock=self,
            rng=random.Random(seed),
        )
