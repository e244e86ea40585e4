"""Fair share between orgs in the queue (SPEC §10): one org's backlog does not delay another's jobs.

Each test has its own fleet: one worker with 4 job slots and a slow model.
Org A keeps 100 requests in flight (a backlog of 96 queued jobs) while B
sends requests one at a time. The measure is the order in which requests
reach the upstream (`support.fairness`), not latency, so a slow or busy
machine does not change the verdict: with A and B in two orgs, at most a
few of A's requests overtake each of B's; with both keys in one org (the
control, first in first out within an org), B waits behind A's backlog.
"""

from __future__ import annotations

import asyncio

import pytest

from support.fairness import CONFIG, KEY_A, KEY_B, ONE_ORG_CONFIG, drive
from support.gateway import running_gateway

pytestmark = pytest.mark.integration

SLOTS = 4
CONCURRENCY = 100
BACKLOG = CONCURRENCY - SLOTS
BOUND = BACKLOG // 4
"""The most of A's requests that may reach the upstream between B's request being sent and
reaching it. Fair share allows the jobs A already runs (up to `SLOTS`, not yet at the upstream),
one pick per org ahead of B on the ring, and reordering within one refill of the slots; the rest
is slack for picks made while B's request is still on its way into the queue."""


def test_another_orgs_backlog_does_not_overtake_org_b() -> None:
    with running_gateway(CONFIG, key_a=KEY_A, key_b=KEY_B, slots=str(SLOTS), upstream_ms="200") as gw:
        figures = asyncio.run(drive(gw.base_url, gw.sim_url, concurrency=CONCURRENCY, samples=10))
    print(figures.text())
    assert figures.a_ok == figures.a_done > 0
    assert max(figures.overtaken) <= BOUND, figures.text()


def test_control_one_orgs_backlog_overtakes_its_own_later_request() -> None:
    with running_gateway(ONE_ORG_CONFIG, key_a=KEY_A, key_b=KEY_B, slots=str(SLOTS), upstream_ms="100") as gw:
        figures = asyncio.run(drive(gw.base_url, gw.sim_url, concurrency=CONCURRENCY, samples=3))
    print(figures.text())
    assert figures.a_ok == figures.a_done > 0
    assert min(figures.overtaken) >= BACKLOG // 2, figures.text()
