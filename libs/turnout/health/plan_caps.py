"""Usage caps of plans, kept fleet-wide until they reset (SPEC §10 plan-cap continuity).

Owns: whose cap an attempt hits (`plan_cap_scope`) and noting that a scope's
usage cap on a target resets in some seconds, so the scope's later requests
with `plan_fallbacks` go straight to them until then. Reading caps is part of
a health read (`HealthView.capped_for`).
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

import logging

from turnout.core.credentials import Credential
from turnout.health.outage import OutagePolicy
from turnout.health.view import HealthView
from turnout.state.breaker_store import BreakerStore, cap_subject
from turnout.state.errors import StateUnavailable

log = logging.getLogger("turnout.breaker")

PLAN_CAP_MAX_S = 86_400.0
"""A usage cap's reset time is believed for at most this long (SPEC §10 plan-cap continuity)."""


def plan_cap_scope(credential: Credential, org: str) -> str:
    """Whose usage cap an attempt with `credential` hits: the platform's
    account (`shared`, fleet-wide) or the org's own key's (the org id)."""
    return "shared" if credential is Credential.SHARED or not org else f"org:{org}"


class PlanCaps:
    """Noting usage caps in the store.

    Args:
        store: where caps live.
        outage: the store-outage policy (a lost cap never refuses anything).
    """

    def __init__(self, store: BreakerStore, outage: OutagePolicy) -> None:
        self._store = store
        self._outage = outage

    async def cap(self, scope: str, target: str, reset_in_s: float, view: HealthView) -> None:
        """Note that `scope`'s usage cap on `target` resets in `reset_in_s`
        seconds (at most `PLAN_CAP_MAX_S`), so the scope's later requests with
        `plan_fallbacks` go straight to them until then (SPEC §10). `view` sees it
        at once. A store outage drops it (logged); a degraded view notes nothing."""
        reset_in_s = min(reset_in_s, PLAN_CAP_MAX_S)
        if reset_in_s <= 0 or view.degraded:
            return
        subject = cap_subject(scope, target)
        until = view.store_now() + reset_in_s
        view.caps[subject] = until
        log.warning(
            "usage cap of %s on %s: later requests with plan fallbacks skip it for %.0f s", scope, target, reset_in_s
        )
        try:
            await self._store.set_plan_cap(subject, until_s=until, ttl_s=reset_in_s)
        except (StateUnavailable, TimeoutError) as exc:
            self._outage(exc, refuse=False)
