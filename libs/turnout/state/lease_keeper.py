"""The leases one ingress holds, renewed until released (SPEC §10 "Limits").

Owns: `LeaseKeeper`, which renews the concurrency slots and budget
reservations (`turnout.state.limit_store.Lease`) of the requests an ingress
is serving, so a long stream keeps them, and lets them expire by themselves
when the process dies.
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from turnout.state.errors import StateUnavailable
from turnout.state.limit_store import Lease, LimitStore

log = logging.getLogger("turnout.limits")


class LeaseKeeper:
    """Renews the leases one ingress holds, every `lease_ms / 3`, until released.

    A lease is renewed while its request runs (a long stream keeps its
    slot); when the process dies renewals stop and the slot frees itself
    within `lease_ms`.
    """

    def __init__(self, store: LimitStore) -> None:
        self._store = store
        self._held: dict[str, Lease] = {}
        self._task: asyncio.Task[None] | None = None

    def hold(self, lease: Lease) -> None:
        """Renew `lease` from now on (no-op for a lease that holds nothing)."""
        if lease.held:
            self._held[lease.id] = lease

    def forget(self, lease: Lease) -> None:
        """Stop renewing `lease` without freeing it (whoever ended its request frees it: a worker
        in its answer's delivery); a renewal already sent keeps a freed lease freed (`ZADD XX`)."""
        self._held.pop(lease.id, None)

    async def release(self, lease: Lease) -> None:
        """Stop renewing `lease` and free its slots; safe to call twice; never raises."""
        self._held.pop(lease.id, None)
        if not lease.held:
            return
        try:
            await self._store.release(lease)
        except StateUnavailable as exc:
            log.warning("limit lease %s not released (it expires by itself): %s", lease.id, exc)

    def start(self) -> None:
        """Start the renewal task."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="turnout-lease-keeper")

    async def stop(self) -> None:
        """Stop renewing (held leases then expire by themselves)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        interval_s = self._store.lease_ms / 3000
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self._store.renew(list(self._held.values()))
            except StateUnavailable as exc:
                log.warning("limit lease renewal failed (%s); the next one retries", exc.kind)
