"""Reading breaker health: one round trip per request, kept a moment (issue: Performance; SPEC §5).

Owns: reading the snapshots of a plan's targets and credentials, their measures
and usage caps (`HealthReads.view`), kept `cache_s` seconds for the process's
later requests of the same subjects and dropped whenever a change is announced
(`forget`; a generation counter keeps a read begun before it from being kept);
a read shipped with a job (`shipped_view`); re-reading a stale view before an
admission (`fresh`). A store outage goes to the outage policy
(`turnout.health.outage`). Clocks injected.
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

import msgspec

from turnout.health.outage import OutagePolicy
from turnout.health.seen import LatestSeen
from turnout.health.view import Clock, HealthView
from turnout.state.bounds import REQUEST_REDIS_TIMEOUT_S
from turnout.state.breaker_store import BreakerStore, Loaded
from turnout.state.errors import StateUnavailable

STALE_AFTER_S = 0.5
"""A snapshot read longer ago than this is read again before an admission."""
CACHE_MAX = 4096
"""Distinct reads `HealthReads.view` keeps at most (one per model and tenant credential set in use)."""


class HealthReads:
    """The process's reads of breaker health.

    Args:
        store: where snapshots live.
        seen: the latest snapshot the process has seen per subject (noted from each read;
            a kept read shows what was seen since).
        outage: the store-outage policy.
        clock: monotonic seconds (view ages).
        wall: epoch seconds (the store clock of a degraded view).
        cache_s: seconds a `view` read serves later views of the same subjects
            (0: every view reads). Whatever this process writes, and whatever is
            announced on `keys.HEALTH_CHANNEL` (`forget`: a failure, a trip, a
            close, a rest, a usage cap, from any process), is seen at once; only
            the decay of scores and the rolling measures may lag by `cache_s`.
    """

    def __init__(
        self,
        store: BreakerStore,
        seen: LatestSeen,
        outage: OutagePolicy,
        *,
        clock: Clock = time.monotonic,
        wall: Clock = time.time,
        cache_s: float = 0.0,
    ) -> None:
        self._store = store
        self._seen = seen
        self._outage = outage
        self._clock = clock
        self._wall = wall
        self._cache_s = cache_s
        self._cache: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[float, Loaded]] = {}  # -> (read at, read)
        self._generation = 0  # bumped by `forget`: a read begun before it is not kept

    async def view(self, subjects: Iterable[str], caps: Iterable[str] = ()) -> HealthView:
        """Read the snapshots of `subjects` (targets and credentials), their
        measures and the usage caps `caps` (`cap_subject`) in one round trip.

        Raises:
            GatewayUnavailable: the store is unreachable and the policy is `fail`.
        """
        names, capped = tuple(dict.fromkeys(subjects)), tuple(dict.fromkeys(caps))
        held = self._cache.get((names, capped)) if self._cache_s > 0 else None
        if held is not None and (age := self._clock() - held[0]) <= self._cache_s:
            return HealthView(self._newest(held[1], held[0]), clock=self._clock, age_s=age)
        generation = self._generation
        try:
            async with asyncio.timeout(REQUEST_REDIS_TIMEOUT_S):  # a hung Redis must not hold the request
                loaded = await self._store.load(list(names), list(capped))
            read_at = self._clock()
            for subject, entry in loaded.entries.items():
                self._seen.note(subject, entry, read_at)
            if self._cache_s > 0 and generation == self._generation:
                if len(self._cache) >= CACHE_MAX:
                    self._cache.clear()
                self._cache[(names, capped)] = (read_at, loaded)
            return HealthView(loaded, clock=self._clock)
        except (StateUnavailable, TimeoutError) as exc:
            self._outage(exc)
            return HealthView(Loaded(now_s=self._wall(), entries={}), clock=self._clock, degraded=True)

    def forget(self, subject: str | bytes = "") -> None:
        """Drop the reads `view` keeps (`cache_s`): `subject` changed elsewhere (a message on
        `keys.HEALTH_CHANNEL`). Every read is dropped, whatever the subject: changes are rare."""
        self._generation += 1
        self._cache.clear()

    def _newest(self, loaded: Loaded, read_at: float) -> Loaded:
        """`loaded` (read at `read_at`, monotonic s) with any snapshot this process has seen since
        (its own writes, conflicts it met)."""
        newer = {
            subject: seen
            for subject, entry in loaded.entries.items()
            if (seen := self._seen.seen_since(subject, entry, read_at)) is not None
        }
        return msgspec.structs.replace(loaded, entries={**loaded.entries, **newer}) if newer else loaded

    def shipped_view(self, subjects: Iterable[str], loaded: Loaded, store_now_s: float) -> HealthView | None:
        """The view `loaded` (read by the ingress, shipped with the job) as of now, or None when it
        cannot stand for a read now: older than `STALE_AFTER_S` by the store's clock (the job
        waited in the queue), or without one of `subjects`.

        Args:
            subjects: the targets and credentials the plan needs.
            loaded: the shipped read (`HealthView.loaded`).
            store_now_s: the store's clock now (epoch seconds).
        """
        age_s = max(0.0, store_now_s - loaded.now_s)
        if age_s > STALE_AFTER_S or any(s not in loaded.entries for s in subjects):
            return None
        return HealthView(loaded, clock=self._clock, age_s=age_s)

    async def reread(self, subject: str, view: HealthView) -> None:
        """Read `subject` again into `view` (with the store's clock).

        Raises:
            StateUnavailable: the store is unreachable.
        """
        view.refresh(await self._store.load([subject]))

    async def fresh(self, subject: str, view: HealthView) -> bool:
        """Re-read `subject` into `view` when the view is stale; False on a store outage.

        Raises:
            GatewayUnavailable: the store is unreachable and the policy is `fail`.
        """
        if view.age_s() <= STALE_AFTER_S and subject in view.entries:
            return True
        try:
            await self.reread(subject, view)
        except (StateUnavailable, TimeoutError) as exc:
            self._outage(exc)
            return False
        return True
