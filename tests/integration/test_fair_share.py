"""Fair share between orgs in the queue (SPEC §10): one org's backlog does not delay another's jobs.

Its own fleet: one worker with 20 job slots, an upstream answering in 500 ms.
Org B sends requests one at a time, idle and then while org A keeps 100
requests in flight (a backlog of about 80 queued jobs at any time, 200 in
all). B's p99 must stay within 2x its idle p99; first-in-first-out pickup
measured 16x (bench/fair_share.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from support.fairness import CONFIG, KEY_A, KEY_B, Figures, drive
from support.gateway import Gateway, start_gateway
from support.procs import Fleet, require_redis

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def fair_gw() -> Iterator[Gateway]:
    require_redis()
    fleet = Fleet()
    try:
        yield start_gateway(fleet, CONFIG, key_a=KEY_A, key_b=KEY_B, slots="20", upstream_ms="500")
    finally:
        fleet.stop_all()


def test_fair_share_org_b_p99_within_2x_idle_while_org_a_floods(fair_gw: Gateway) -> None:
    figures = asyncio.run(drive(fair_gw.base_url, flood=200, concurrency=100, samples=10))
    print(figures.text())
    assert figures.a_ok == figures.a_done == 200
    assert Figures.p99(figures.flood_b) <= 2 * Figures.p99(figures.idle_b), figures.text()
