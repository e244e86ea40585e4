"""The rolling speed averages (`turnout.health.speed`; SPEC §10)."""

from __future__ import annotations

from turnout.core.breaker import (
    BreakerSettings,
)
from turnout.health import (
    Breakers,
)
from turnout.state.breaker_store import MemoryBreakerStore


async def test_health_view_orders_by_the_measures_of_closed_targets_too() -> None:
    """SPEC §10: the view's ordering facts carry each target's rolling
    measures, read in the same load as the snapshots."""

    breakers = Breakers.over(MemoryBreakerStore(), BreakerSettings(), speed_alpha=0.5)
    await breakers.speed.record("a/m", ttft_ms=100.0, tokens_per_s=None)
    await breakers.speed.record("a/m", ttft_ms=300.0, tokens_per_s=40.0)
    await breakers.speed.record("b/m", ttft_ms=None, tokens_per_s=None)  # nothing to record
    view = await breakers.reads.view(["a/m", "b/m"])
    health = view.ordering_health(breakers.settings)
    assert set(health) == {"a/m"}
    assert health["a/m"].ttft_ms == 200.0 and health["a/m"].tokens_per_s == 40.0
    assert health["a/m"].score == 1.0
