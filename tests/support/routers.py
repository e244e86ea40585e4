"""`fake_router`: a `Router` over in-process upstreams, on a fake clock, for router tests."""

from __future__ import annotations

import random
from typing import Any

import httpx

from support.clocks import FakeClock
from turnout.catalog import Catalog
from turnout.health import Breakers
from turnout.router import NullObserver, Router


def fake_router(
    catalog: Catalog,
    transport: httpx.MockTransport,
    *,
    clock: FakeClock,
    observer: NullObserver | None = None,
    seed: int = 5,
    breakers: Breakers | None = None,
    **extra: Any,
) -> Router:
    """A router whose upstream calls `transport` answers, whose sleeps and time are `clock`'s,
    with seeded draws and in-memory breakers on `clock` unless `breakers` is given; `extra`
    goes to `Router` as is."""
    return Router(
        catalog=catalog,
        http=httpx.AsyncClient(transport=transport),
        observer=observer or NullObserver(),
        sleep=clock.sleep,
        clock=clock,
        rng=random.Random(seed),
        breakers=breakers or clock.breakers(catalog),
        **extra,
    )
