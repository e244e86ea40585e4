"""The explicit policy for a breaker store outage (SPEC §5; never a silent default).

Owns: logging an outage of the shared store (at most once per 10 s) and, under
policy `fail`, refusing the request. Every part of `turnout.health` that talks
to the store hands its outages here. Clock injected.
Must not import: services, FastAPI, httpx.

Store outage policy (`breaker.on_store_error` in the configuration):
    closed  serve as if every breaker were CLOSED (availability first); the
            outage is logged, and results are not recorded until it ends.
    fail    refuse requests with 503 `redis_unavailable` while it lasts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Literal

from turnout.errors import GatewayUnavailable
from turnout.state.errors import outage_kind

log = logging.getLogger("turnout.breaker")

StoreErrorPolicy = Literal["closed", "fail"]
LOG_EVERY_S = 10.0
"""An outage is logged at most once per this many seconds."""


class OutagePolicy:
    """What a store outage does, for every part of the process's breakers.

    Args:
        policy: `closed` or `fail` (module doc).
        clock: monotonic seconds (log throttling).
    """

    def __init__(self, policy: StoreErrorPolicy = "closed", *, clock: Callable[[], float] = time.monotonic) -> None:
        self.policy: StoreErrorPolicy = policy
        self._clock = clock
        self._logged_at = float("-inf")

    def __call__(self, exc: BaseException, *, refuse: bool = True) -> None:
        """Log the outage `exc`; under policy `fail`, refuse (unless `refuse` is False:
        recording the result of an attempt that already ran never refuses it).

        Raises:
            GatewayUnavailable: policy `fail` and `refuse` (503 `redis_unavailable`).
        """
        now = self._clock()
        if now - self._logged_at > LOG_EVERY_S:
            self._logged_at = now
            log.warning("breaker store unreachable (%s); policy on_store_error=%s", outage_kind(exc), self.policy)
        if refuse and self.policy == "fail":
            raise GatewayUnavailable(
                "The gateway's shared state is unreachable right now; retry shortly.",
                retry_after_s=1,
                code="redis_unavailable",
            ) from exc
