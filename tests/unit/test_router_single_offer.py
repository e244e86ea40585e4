"""Without `cross_provider_same_model` (policy), or with `allow_fallbacks: false` and no `order`
(the request's preferences), a model keeps one offer, chosen by health: the router reads the
health of every offer first, so an offer whose circuit breaker is OPEN is never the one kept.

Before the fix the read covered one offer per model picked with no health at all, and the
plan then ranked the unread offers as healthy (SPEC §5: a target with no data ranks healthy).
"""

from __future__ import annotations

import random

import httpx
import pytest

from support.clocks import FakeClock
from support.two_providers import TWO_PROVIDERS, completion
from turnout.catalog import Catalog
from turnout.config import parse_config
from turnout.core.breaker import BreakerSnapshot
from turnout.core.plan import RoutingSettings
from turnout.core.preferences import Preferences
from turnout.router import RequestInfo, Router
from turnout.state.breaker_store import MemoryBreakerStore

CONFIG = (
    TWO_PROVIDERS
    + """\
models:
  solo:
    offers:
      - {provider: pa, model: m-a}
      - {provider: pb, model: m-b}
"""
)
ONE_OFFER = CONFIG + "policy:\n  fallback: {cross_provider_same_model: false}\n"


def _upstream(hosts: list[str]) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        hosts.append(request.url.host)
        return completion("m")

    return httpx.MockTransport(answer)


@pytest.mark.parametrize(
    ("config_text", "preferences"),
    [(ONE_OFFER, Preferences()), (CONFIG, Preferences(allow_fallbacks=False))],
    ids=["policy", "preferences"],
)
@pytest.mark.parametrize("open_target", ["pa/m-a", "pb/m-b"])
@pytest.mark.parametrize("seed", range(12))
async def test_the_offer_kept_is_never_one_whose_breaker_is_open(
    config_text: str, preferences: Preferences, open_target: str, seed: int
) -> None:
    config = parse_config(config_text, env={})
    catalog = Catalog(config)
    clock = FakeClock(1000.0)
    breakers = clock.breakers(catalog, seed=seed)
    store = breakers.store
    assert isinstance(store, MemoryBreakerStore)
    tripped = BreakerSnapshot(open=True, trips=1, opened_at_s=1000.0, cooldown_s=60.0, trip_rule="run")
    assert await store.compare_and_set(open_target, 0, tripped) is None
    hosts: list[str] = []
    router = Router(
        catalog=catalog,
        http=httpx.AsyncClient(transport=_upstream(hosts)),
        sleep=clock.sleep,
        clock=clock,
        rng=random.Random(seed),
        breakers=breakers,
    )
    plan, view = await router.plan("solo", RoutingSettings(), config.policy, preferences=preferences)
    assert open_target in view.entries  # its health was read
    assert [e.target.key for e in plan.entries] == [t for t in ("pa/m-a", "pb/m-b") if t != open_target]
    info = RequestInfo(request_id="rid", org="acme", requested_model="solo")
    routed = await router.route(
        {"model": "solo", "messages": []}, plan=plan, view=view, policy=config.policy, time_left_s=30, info=info
    )
    assert routed.verdict is None and routed.body is not None
    assert hosts == ["pb.test" if open_target == "pa/m-a" else "pa.test"]
