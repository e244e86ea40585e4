"""`Router(paused=...)`: called each time a request's work stops to wait on the upstream or the clock.

Just before every upstream call (after the attempt's started record is stored) and
before every wait between attempts; a worker's start gate gives the job's pass
back there (`turnout_worker.start_gate`).
"""

from __future__ import annotations

import random

import httpx

from support.clocks import FakeClock
from support.two_providers import CHAIN, TWO_PROVIDERS, a_down_b_up
from turnout.catalog import Catalog
from turnout.config import parse_config
from turnout.core.plan import RoutingSettings
from turnout.router import NullObserver, RequestInfo, Router

CONFIG = (
    TWO_PROVIDERS
    + CHAIN
    + """\
policy:
  retry: {max_retries: 1, base_ms: 250}
"""
)


async def test_paused_comes_before_every_upstream_call_and_every_wait() -> None:
    config = parse_config(CONFIG, env={})
    catalog = Catalog(config)
    events: list[str] = []
    clock = FakeClock(0.0)

    class Spy(NullObserver):
        async def attempt_dispatched(self, handle: object) -> None:
            events.append("started record")

    async def sleep(delay_s: float) -> None:
        events.append("wait")
        await clock.sleep(delay_s)

    router = Router(
        catalog=catalog,
        http=httpx.AsyncClient(transport=a_down_b_up(events)),
        observer=Spy(),
        sleep=sleep,
        clock=clock,
        rng=random.Random(5),
        breakers=clock.breakers(catalog),
        paused=lambda: events.append("paused"),
    )
    plan, view = await router.plan("chain", RoutingSettings(), config.policy)
    info = RequestInfo(request_id="rid", org="acme", requested_model="chain")
    routed = await router.route(
        {"model": "chain", "messages": []}, plan=plan, view=view, policy=config.policy, time_left_s=30, info=info
    )
    assert routed.verdict is None and routed.body is not None
    assert events == [
        "started record",
        "paused",
        "upstream pa.test",
        "paused",
        "wait",  # the retry's backoff
        "started record",
        "paused",
        "upstream pa.test",
        "started record",
        "paused",
        "upstream pb.test",
    ]


async def test_without_paused_nothing_is_called() -> None:
    config = parse_config(CONFIG, env={})
    catalog = Catalog(config)
    clock = FakeClock(0.0)
    router = Router(
        catalog=catalog,
        http=httpx.AsyncClient(transport=a_down_b_up([])),
        sleep=clock.sleep,
        clock=clock,
        rng=random.Random(5),
        breakers=clock.breakers(catalog),
    )
    plan, view = await router.plan("chain", RoutingSettings(), config.policy)
    info = RequestInfo(request_id="rid", org="acme", requested_model="chain")
    routed = await router.route(
        {"model": "chain", "messages": []}, plan=plan, view=view, policy=config.policy, time_left_s=30, info=info
    )
    assert routed.verdict is None and routed.body is not None
