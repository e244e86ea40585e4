"""The health of a tenant's own credential for a provider (SPEC §5 "What counts").

Owns: the health subject of an org's own key for a provider, and whether that
key may be used now. Its failures are counted by `turnout.health.results`
(`turnout.core.recording`), never against the shared target.
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

from turnout.core.breaker import BreakerState, state_at
from turnout.health.reads import HealthReads
from turnout.health.view import HealthView


def credential_subject(org: str, provider: str) -> str:
    """The health key of an org's own credential for a provider (no `/`, so
    it never collides with a `provider/model` target key)."""
    return f"credential:{org}:{provider}"


class CredentialHealth:
    """Admission of tenants' own credentials.

    Args:
        reads: re-reads a stale view.
    """

    def __init__(self, reads: HealthReads) -> None:
        self._reads = reads

    async def admits(self, subject: str, view: HealthView) -> bool:
        """Whether a tenant's own credential (`credential_subject`) may be used now:
        False while its health is OPEN (HALF_OPEN lets the next attempt through as
        its probe). A degraded view, or a store outage under policy `closed`, admits.

        Raises:
            GatewayUnavailable: the store is unreachable and the policy is `fail`.
        """
        if view.degraded or not await self._reads.fresh(subject, view):
            return True
        return state_at(view.snapshot(subject), view.store_now()) is not BreakerState.OPEN
