"""Breakers: the shell around the pure breaker core and its shared store.

Owns: reading the health of a plan's targets in one round trip, admitting an
attempt (with the fleet-wide probe permit in HALF_OPEN), recording counted
results with compare-and-set retries, logging transitions, and the explicit
policy for a store outage (SPEC §5; never a silent default).
Must not import: services, FastAPI, httpx.

Store outage policy (`breaker.on_store_error` in the configuration):
    closed  serve as if every breaker were CLOSED (availability first); the
            outage is logged, and results are not recorded until it ends.
    fail    refuse requests with 503 `redis_unavailable` while it lasts.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import Literal

import msgspec
from redis.exceptions import RedisError

from turnout.core.breaker import (
    CLOSED, Admission, BreakerSettings, BreakerSnapshot, BreakerState, Counted, admit, record, reopen_in_s, state_at,
    success_rate,
)
from turnout.core.classify import counts_against_health
from turnout.core.types import FailureKind
from turnout.errors import GatewayUnavailable
from turnout.state.breaker_store import BreakerStore, Loaded, Versioned

log = logging.getLogger("turnout.breaker")

StoreErrorPolicy = Literal["closed", "fail"]
STALE_AFTER_S = 0.5
"""A snapshot read longer ago than this is read again before an admission."""
_CAS_TRIES = 100


def counted_of(kind: FailureKind) -> Counted:
    """How an attempt's classified outcome counts (SPEC §5: client errors,
    cancellations and missing credentials never count)."""
    if kind is FailureKind.SUCCESS:
        return Counted.SUCCESS
    return Counted.FAILURE if counts_against_health(kind) else Counted.NEUTRAL


class HealthView:
    """Snapshots of one request's targets, as read at one moment.

    Attributes:
        now_s: store clock at the read (epoch seconds).
        entries: target -> versioned snapshot.
        read_at: local monotonic time of the read.
        degraded: the store was unreachable; everything reads CLOSED.
    """

    def __init__(self, loaded: Loaded, *, degraded: bool = False) -> None:
        self.now_s = loaded.now_s
        self.entries = dict(loaded.entries)
        self.read_at = time.monotonic()
        self.degraded = degraded

    def store_now(self) -> float:
        """The store clock now, extrapolated from the read."""
        return self.now_s + (time.monotonic() - self.read_at)

    def snapshot(self, target: str) -> BreakerSnapshot:
        """The snapshot of `target` (CLOSED when unknown)."""
        entry = self.entries.get(target)
        return entry.snapshot if entry else CLOSED

    def success_rates(self) -> dict[str, float]:
        """target -> success rate, for targets with history (plan ordering)."""
        rates = {t: success_rate(e.snapshot) for t, e in self.entries.items()}
        return {t: r for t, r in rates.items() if r is not None}

    def all_open(self, targets: Sequence[str]) -> float | None:
        """Seconds until the first of `targets` admits again, if every one is OPEN now; else None."""
        if not targets:
            return None
        now = self.store_now()
        waits = []
        for target in targets:
            snap = self.snapshot(target)
            if state_at(snap, now) is not BreakerState.OPEN:
                return None
            waits.append(reopen_in_s(snap, now))
        return min(waits)


class Gate(msgspec.Struct, frozen=True):
    """An admission decision for one attempt.

    Attributes:
        admitted: the attempt may go.
        probe_token: the HALF_OPEN probe permit this attempt holds, or None.
        reopen_in_s: for a refusal, seconds until the target admits again.
    """

    admitted: bool
    probe_token: str | None = None
    reopen_in_s: float | None = None

    @property
    def probe(self) -> bool:
        """The attempt is the target's probe."""
        return self.probe_token is not None


class Breakers:
    """Fleet-wide breakers and health over a `BreakerStore`.

    Args:
        store: where snapshots live.
        settings: thresholds.
        on_store_error: the outage policy (module doc).
        on_transition: called with (target, old state, new state) after a
            stored transition (metrics hook).
    """

    def __init__(
        self,
        store: BreakerStore,
        settings: BreakerSettings,
        *,
        on_store_error: StoreErrorPolicy = "closed",
        on_transition: Callable[[str, BreakerState, BreakerState], None] | None = None,
    ) -> None:
        self._store = store
        self.settings = settings
        self._on_store_error = on_store_error
        self._on_transition = on_transition
        self._locks: dict[str, asyncio.Lock] = {}
        self._outage_logged_at = 0.0

    def _outage(self, exc: BaseException, *, refuse: bool = True) -> None:
        """Log a store outage; under policy `fail`, refuse (unless `refuse` is False:
        recording the result of an attempt that already ran never refuses it)."""
        now = time.monotonic()
        if now - self._outage_logged_at > 10:
            self._outage_logged_at = now
            log.warning(
                "breaker store unreachable (%s); policy on_store_error=%s", type(exc).__name__, self._on_store_error
            )
        if refuse and self._on_store_error == "fail":
            raise GatewayUnavailable(
                "The gateway's shared state is unreachable right now; retry shortly.",
                retry_after_s=1, code="redis_unavailable",
            ) from exc

    async def view(self, targets: Sequence[str]) -> HealthView:
        """Read the snapshots of `targets` in one round trip.

        Raises:
            GatewayUnavailable: the store is unreachable and the policy is `fail`.
        """
        try:
            return HealthView(await self._store.load(list(dict.fromkeys(targets))))
        except (RedisError, OSError) as exc:
            self._outage(exc)
            return HealthView(Loaded(now_s=time.time(), entries={}), degraded=True)

    async def admit(self, target: str, view: HealthView) -> Gate:
        """Whether an attempt may go to `target` now; takes the probe permit in HALF_OPEN."""
        if view.degraded:
            return Gate(admitted=True)
        if time.monotonic() - view.read_at > STALE_AFTER_S:
            try:
                fresh = await self._store.load([target])
            except (RedisError, OSError) as exc:
                self._outage(exc)
                return Gate(admitted=True)
            view.entries.update(fresh.entries)
            view.now_s, view.read_at = fresh.now_s, time.monotonic()
        snap, now = view.snapshot(target), view.store_now()
        decision = admit(snap, now)
        if decision is Admission.ADMIT:
            return Gate(admitted=True)
        if decision is Admission.REJECT:
            return Gate(admitted=False, reopen_in_s=reopen_in_s(snap, now))
        try:
            token = await self._store.acquire_probe(target, self.settings.probe_ttl_s)
        except (RedisError, OSError) as exc:
            self._outage(exc)
            return Gate(admitted=True)
        if token is None:
            return Gate(admitted=False, reopen_in_s=1.0)
        # The view may predate a probe that has since ended (and given the permit
        # back): decide again on the snapshot as stored now, holding the permit.
        try:
            fresh = await self._store.load([target])
        except (RedisError, OSError) as exc:
            self._outage(exc)
            return Gate(admitted=True, probe_token=token)  # we hold the permit: record() gives it back
        view.entries.update(fresh.entries)
        view.now_s, view.read_at = fresh.now_s, time.monotonic()
        snap = view.snapshot(target)
        decision = admit(snap, fresh.now_s)
        if decision is Admission.PROBE:
            log.info("breaker %s HALF_OPEN: probe admitted", target)
            return Gate(admitted=True, probe_token=token)
        try:
            await self._store.release_probe(target, token)
        except (RedisError, OSError) as exc:  # the permit expires on its own
            self._outage(exc)
        if decision is Admission.ADMIT:
            return Gate(admitted=True)
        return Gate(admitted=False, reopen_in_s=reopen_in_s(snap, fresh.now_s))

    async def record(
        self, target: str, kind: FailureKind, *, probe_token: str | None, error: str, view: HealthView
    ) -> None:
        """Count one attempt's result (compare-and-set, retried on conflict with
        jittered backoff) and give back the probe permit it held, if any."""
        counted = counted_of(kind)
        probe = probe_token is not None
        try:
            if counted is not Counted.NEUTRAL and not view.degraded:
                lock = self._locks.setdefault(target, asyncio.Lock())
                async with lock:  # one writer per target per process: fewer conflicts
                    await self._record(target, counted, probe=probe, error=error, view=view)
        except (RedisError, OSError) as exc:
            self._outage(exc, refuse=False)
        finally:
            if probe_token is not None:
                try:
                    await self._store.release_probe(target, probe_token)
                except (RedisError, OSError) as exc:  # the permit expires on its own
                    self._outage(exc, refuse=False)

    async def _record(self, target: str, counted: Counted, *, probe: bool, error: str, view: HealthView) -> None:
        entry = view.entries.get(target, Versioned(0, CLOSED))
        now = view.store_now()
        for attempt in range(_CAS_TRIES):
            if attempt >= 2:  # heavy contention: spread the writers out (full jitter, ≤ 20 ms)
                await asyncio.sleep(random.uniform(0, min(0.02, 0.001 * 2 ** (attempt - 2))))
            new = record(entry.snapshot, counted, probe=probe, now_s=now, settings=self.settings, error=error[:200])
            if new == entry.snapshot:
                return
            current = await self._store.compare_and_set(target, entry.version, new)
            if current is None:
                view.entries[target] = Versioned(entry.version + 1, new)
                self._transitioned(target, entry.snapshot, new, now)
                return
            entry, now = current.entries[target], current.now_s
        log.error("breaker %s: result not recorded after %d conflicting writes", target, _CAS_TRIES)

    def _transitioned(self, target: str, old: BreakerSnapshot, new: BreakerSnapshot, now: float) -> None:
        before, after = state_at(old, now), state_at(new, now)
        if before is after and old.opened_at_s == new.opened_at_s:
            return
        if new.open:
            log.warning(
                "breaker %s OPEN for %.0f s (trip %d): %s", target, new.cooldown_s, new.trips, new.last_error or "-"
            )
        else:
            log.info("breaker %s CLOSED: probe succeeded", target)
        if self._on_transition is not None:
            self._on_transition(target, before, after)
