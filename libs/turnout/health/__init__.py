"""Breakers: the shell around the pure breaker core and its shared store.

Owns: reading the health of a plan's targets (and of the tenant's
credentials) in one round trip, kept `cache_s` seconds; admitting an attempt
(the fleet-wide probe permit in HALF_OPEN, renewed while the probe runs; the
slow-start share; a provider's "not before"); recording counted results
(written in batches by `writes.SnapshotWrites`); logging transitions and
alarms; and the explicit policy for a store outage (SPEC §5; never a silent
default). Clock and RNG are injected. Its modules: `view` (one request's read,
`HealthView`), `writes` (the batched compare-and-set writes).
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
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Literal

import msgspec

from turnout.core.breaker import (
    Admission,
    BreakerSettings,
    BreakerSnapshot,
    BreakerState,
    Counted,
    admit,
    pace,
    ramp_share,
    record,
    reopen_in_s,
    rest,
    state_at,
    unavailable_for_s,
)
from turnout.core.counting import count
from turnout.core.credentials import Credential
from turnout.core.loop import SkipReason
from turnout.core.ordering import OrderSettings
from turnout.core.types import FailureKind
from turnout.errors import GatewayUnavailable
from turnout.health.view import Clock as Clock
from turnout.health.view import HealthView as HealthView
from turnout.health.writes import QUIET_WINDOW_S, SnapshotWrites, lost_write_logger
from turnout.state.bounds import RECORD_TIMEOUT_S as RECORD_BOUND_S
from turnout.state.bounds import REQUEST_REDIS_TIMEOUT_S
from turnout.state.breaker_store import (
    BreakerStore,
    Loaded,
    RedisBreakerStore,
    Speed,
    SpeedSample,
    cap_subject,
)
from turnout.state.errors import StateUnavailable, outage_kind

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from turnout.catalog.snapshot import CatalogSource
    from turnout.config import Config
    from turnout.observability.metrics import Metrics

log = logging.getLogger("turnout.breaker")

StoreErrorPolicy = Literal["closed", "fail"]
STALE_AFTER_S = 0.5
"""A snapshot read longer ago than this is read again before an admission."""
RAMP_RETRY_S = 1.0
"""Seconds a request left out by slow start is told to wait."""
MAX_PROBE_HOLD_S = 3600.0
"""A probe permit is renewed at most this long (a guard against a lost release)."""
RECORD_TIMEOUT_S = RECORD_BOUND_S
"""Longest a result's recording (or a permit's release) may take: a committed
stream's end waits for it, so a hung store must not hold the client; past it
the result is not recorded (the store-outage policy) and a permit expires on
its own."""


PLAN_CAP_MAX_S = 86_400.0
"""A usage cap's reset time is believed for at most this long (SPEC §10 plan-cap continuity)."""


def plan_cap_scope(credential: Credential, org: str) -> str:
    """Whose usage cap an attempt with `credential` hits: the platform's
    account (`shared`, fleet-wide) or the org's own key's (the org id)."""
    return "shared" if credential is Credential.SHARED or not org else f"org:{org}"


def credential_subject(org: str, provider: str) -> str:
    """The health key of an org's own credential for a provider (no `/`, so
    it never collides with a `provider/model` target key)."""
    return f"credential:{org}:{provider}"


class Gate(msgspec.Struct, frozen=True):
    """An admission decision for one attempt.

    Attributes:
        admitted: the attempt may go.
        probe_token: the HALF_OPEN probe permit this attempt holds, or None.
        reopen_in_s: for a refusal, seconds until the target may admit again.
        reason: for a refusal, why (a `SkipReason`).
    """

    admitted: bool
    probe_token: str | None = None
    reopen_in_s: float | None = None
    reason: SkipReason | None = None

    @property
    def probe(self) -> bool:
        """The attempt is the target's probe."""
        return self.probe_token is not None


_ADMITTED = Gate(admitted=True)
_CACHE_MAX = 4096
"""Distinct reads `Breakers.view` keeps at most (one per model and tenant credential set in use)."""


class Breakers:
    """Fleet-wide breakers, health and credential health over a `BreakerStore`.

    Args:
        store: where snapshots live.
        settings: thresholds.
        on_store_error: the outage policy (module doc).
        on_transition: called with (subject, old state, new state) after a
            stored transition (metrics hook).
        on_alarm: called with the target key when the platform key of its
            provider is rejected or out of quota (metrics hook).
        on_trip: called with (subject, rule, sole) after a stored trip
            (metrics hook).
        sole_targets: target keys that are the only offer of a model.
        clock: monotonic seconds (view ages, log throttling).
        wall: epoch seconds (the store clock of a degraded view).
        rng: jitter of compare-and-set retries.
        cache_s: seconds a `view` read serves later views of the same subjects
            (0: every view reads). Whatever this process writes, and whatever is
            announced on `keys.HEALTH_CHANNEL` (`forget`: a failure, a trip, a
            close, a rest, a usage cap, from any process), is seen at once; only
            the decay of scores and the rolling measures may lag by `cache_s`.
        quiet_window_s: longest a plain success waits for others of its subject
            to share its write (seconds; `turnout.health.writes.QUIET_WINDOW_S`).
    """

    def __init__(
        self,
        store: BreakerStore,
        settings: BreakerSettings,
        *,
        on_store_error: StoreErrorPolicy = "closed",
        on_transition: Callable[[str, BreakerState, BreakerState], None] | None = None,
        on_alarm: Callable[[str], None] | None = None,
        on_trip: Callable[[str, str, bool], None] | None = None,
        sole_targets: frozenset[str] = frozenset(),
        speed_alpha: float = 0.2,
        speed_ttl_s: int = 3600,
        clock: Clock = time.monotonic,
        wall: Clock = time.time,
        rng: random.Random | None = None,
        cache_s: float = 0.0,
        quiet_window_s: float = QUIET_WINDOW_S,
    ) -> None:
        self._wall = wall
        self._cache_s = cache_s
        self._cache: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[float, Loaded]] = {}  # -> (read at, read)
        self._generation = 0  # bumped by `forget`: a read begun before it is not kept
        self._store = store
        self._speed_alpha = speed_alpha
        self._speed_ttl_s = speed_ttl_s
        self.settings = settings
        self.order_settings = OrderSettings(tolerance=settings.tolerance, explore=settings.explore)
        self._on_store_error = on_store_error
        self._on_transition = on_transition
        self._on_alarm = on_alarm
        self._on_trip = on_trip
        self._sole = sole_targets
        self._clock = clock
        self._rng = rng or random.Random()
        self._writes = SnapshotWrites(
            store,
            clock=clock,
            rng=self._rng,
            on_written=self._written,
            on_announced=self.forget,
            on_lost=lost_write_logger(lambda exc: self._outage(exc, refuse=False)),
            quiet_window_s=quiet_window_s,
        )
        self._renewals: dict[str, asyncio.Task[None]] = {}
        self._credits: dict[str, tuple[float, float]] = {}  # target -> (closed_at_s, slow-start credit)
        self._outage_logged_at = float("-inf")

    def use_sole_targets(self, sole_targets: frozenset[str]) -> None:
        """Take the sole offers of a new catalog (`turnout.catalog.live`); breaker state is kept."""
        self._sole = sole_targets

    def _outage(self, exc: BaseException, *, refuse: bool = True) -> None:
        """Log a store outage; under policy `fail`, refuse (unless `refuse` is False:
        recording the result of an attempt that already ran never refuses it)."""
        now = self._clock()
        if now - self._outage_logged_at > 10:
            self._outage_logged_at = now
            log.warning(
                "breaker store unreachable (%s); policy on_store_error=%s", outage_kind(exc), self._on_store_error
            )
        if refuse and self._on_store_error == "fail":
            raise GatewayUnavailable(
                "The gateway's shared state is unreachable right now; retry shortly.",
                retry_after_s=1,
                code="redis_unavailable",
            ) from exc

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
                self._writes.note(subject, entry, read_at)
            if self._cache_s > 0 and generation == self._generation:
                if len(self._cache) >= _CACHE_MAX:
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
            if (seen := self._writes.seen_since(subject, entry, read_at)) is not None
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

    async def _fresh(self, subject: str, view: HealthView) -> bool:
        """Re-read `subject` into `view` when the view is stale; False on a store outage."""
        if view.age_s() <= STALE_AFTER_S and subject in view.entries:
            return True
        try:
            view.refresh(await self._store.load([subject]))
        except (StateUnavailable, TimeoutError) as exc:
            self._outage(exc)
            return False
        return True

    async def admit(self, target: str, view: HealthView) -> Gate:
        """Whether an attempt may go to `target` now (SPEC §5).

        Takes the probe permit in HALF_OPEN (renewed until `record` gives it
        back); applies the slow-start share and the provider's "not before".
        """
        if view.degraded or not await self._fresh(target, view):
            return _ADMITTED
        snap, now = view.snapshot(target), view.store_now()
        draw = self._pace(target, snap, now)
        decision = admit(snap, now, self.settings, draw)
        if decision is not Admission.PROBE:
            return self._gate(decision, snap, now)
        try:
            token = await self._store.acquire_probe(target, self.settings.probe_ttl_s)
        except (StateUnavailable, TimeoutError) as exc:
            self._outage(exc)
            return _ADMITTED
        if token is None:
            return Gate(admitted=False, reopen_in_s=RAMP_RETRY_S, reason=SkipReason.CIRCUIT_OPEN)
        # The view may predate a probe that has since ended (and given the permit
        # back): decide again on the snapshot as stored now, holding the permit.
        try:
            view.refresh(await self._store.load([target]))
        except (StateUnavailable, TimeoutError) as exc:
            self._outage(exc)
            self._hold(target, token)
            return Gate(admitted=True, probe_token=token)  # we hold the permit: record() gives it back
        snap, now = view.snapshot(target), view.now_s
        decision = admit(snap, now, self.settings, self._pace(target, snap, now))
        if decision is Admission.PROBE:
            log.info("breaker %s HALF_OPEN: probe admitted", target)
            self._hold(target, token)
            return Gate(admitted=True, probe_token=token)
        await self._release(target, token)
        return self._gate(decision, snap, now)

    def _pace(self, target: str, snap: BreakerSnapshot, now: float) -> float:
        """The slow-start draw of this process for `target`: 0.0 (admit) or 1.0
        (leave out), paced by an accumulator per close (`turnout.core.breaker.pace`)."""
        share = ramp_share(snap, now, self.settings)
        if share >= 1.0:
            self._credits.pop(target, None)
            return 0.0
        closed_at, credit = self._credits.get(target, (snap.closed_at_s, 0.0))
        if closed_at != snap.closed_at_s:
            credit = 0.0
        admitted, credit = pace(credit, share)
        self._credits[target] = (snap.closed_at_s, credit)
        return 0.0 if admitted else 1.0

    def _gate(self, decision: Admission, snap: BreakerSnapshot, now: float) -> Gate:
        if decision is Admission.ADMIT:
            return _ADMITTED
        if decision is Admission.REST:
            return Gate(admitted=False, reopen_in_s=unavailable_for_s(snap, now), reason=SkipReason.RESTING)
        if decision is Admission.RAMP:
            return Gate(admitted=False, reopen_in_s=RAMP_RETRY_S, reason=SkipReason.RAMPING)
        return Gate(admitted=False, reopen_in_s=max(reopen_in_s(snap, now), 0.0), reason=SkipReason.CIRCUIT_OPEN)

    async def credential_admits(self, subject: str, view: HealthView) -> bool:
        """Whether a tenant's own credential may be used now: False while its
        credential health is OPEN (HALF_OPEN lets the next attempt through as
        its probe)."""
        if view.degraded or not await self._fresh(subject, view):
            return True
        return state_at(view.snapshot(subject), view.store_now()) is not BreakerState.OPEN

    def _hold(self, target: str, token: str) -> None:
        """Renew the probe permit every third of its TTL until it is released."""
        ttl = self.settings.probe_ttl_s

        async def renew() -> None:
            started = self._clock()
            while self._clock() - started < MAX_PROBE_HOLD_S:
                await asyncio.sleep(ttl / 3)
                try:
                    if not await self._store.renew_probe(target, token, ttl):
                        return
                except (StateUnavailable, TimeoutError) as exc:
                    self._outage(exc, refuse=False)

        self._renewals[token] = asyncio.get_running_loop().create_task(renew(), name=f"probe-renew {target}")

    async def _release(self, target: str, token: str) -> None:
        task = self._renewals.pop(token, None)
        if task is not None:
            task.cancel()
            await asyncio.wait([task])  # never swallows a cancellation of the caller
        try:
            async with asyncio.timeout(REQUEST_REDIS_TIMEOUT_S):
                await self._store.release_probe(target, token)
        except (StateUnavailable, TimeoutError) as exc:  # the permit expires on its own
            self._outage(exc, refuse=False)

    async def record(
        self,
        target: str,
        kind: FailureKind,
        *,
        probe_token: str | None,
        error: str,
        view: HealthView,
        credential: Credential = Credential.SHARED,
        credential_key: str | None = None,
        retry_after_s: float | None = None,
        measures: Speed | None = None,
    ) -> None:
        """Count one attempt's result, fold its measures in and give back the probe permit it held.

        Args:
            target: the target key.
            kind: the classified outcome.
            probe_token: the permit the attempt held, or None.
            error: short, scrubbed description of a failure.
            view: the request's health view (its entries are updated).
            credential: the credential the attempt carried.
            credential_key: the credential's health subject
                (`credential_subject`) for a tenant-owned credential.
            retry_after_s: the response's Retry-After hint, seconds.
            measures: the attempt's measures (`record_speed`), folded in by
                the target's first compare-and-set write (one round trip for
                both), or on their own when no write is needed.

        What counts where is `turnout.core.counting.count`; writes are
        compare-and-set, retried on conflict with jittered backoff.
        """
        sample = None
        if measures is not None and (measures.ttft_ms is not None or measures.tokens_per_s is not None):
            sample = SpeedSample(
                ttft_ms=measures.ttft_ms,
                tokens_per_s=measures.tokens_per_s,
                alpha=self._speed_alpha,
                ttl_s=self._speed_ttl_s,
            )
        counting = count(kind, credential=credential, retry_after_s=retry_after_s)
        if counting.alarm:
            log.error(
                "platform key of %s rejected (%s): operator action needed; not counted against the target", target, kind
            )
            if self._on_alarm is not None:
                self._on_alarm(target)
        try:
            if not view.degraded:
                async with asyncio.timeout(RECORD_TIMEOUT_S):  # a hung store must not hold the answer
                    if counting.target is not Counted.NEUTRAL or counting.rest_s is not None:
                        if await self._update(
                            target,
                            view,
                            lambda snap, now: self._apply(
                                snap,
                                now,
                                counting.target,
                                counting.rest_s,
                                probe=probe_token is not None,
                                sole=target in self._sole,
                                error=error[:200],
                            ),
                            speed=sample,
                            quiet=counting.target is Counted.SUCCESS
                            and probe_token is None
                            and counting.rest_s is None
                            and (sample is None or target in view.speeds),  # a first measure is news
                        ):
                            sample = None  # folded in by the write
                    if credential_key is not None and counting.credential is not Counted.NEUTRAL:
                        await self._update(
                            credential_key,
                            view,
                            lambda snap, now: self._apply(
                                snap,
                                now,
                                counting.credential,
                                None,
                                probe=state_at(snap, now) is BreakerState.HALF_OPEN,
                                sole=False,
                                error=error[:200],
                            ),
                        )
        except (StateUnavailable, TimeoutError) as exc:
            self._outage(exc, refuse=False)
        finally:
            if probe_token is not None:
                await self._release(target, probe_token)
        if sample is not None:
            await self.record_speed(target, ttft_ms=sample.ttft_ms, tokens_per_s=sample.tokens_per_s)

    async def cap_plan(self, scope: str, target: str, reset_in_s: float, view: HealthView) -> None:
        """Note that `scope`'s usage cap on `target` resets in `reset_in_s`
        seconds (at most `PLAN_CAP_MAX_S`), so the scope's later requests with
        `plan_fallbacks` go straight to them until then (SPEC §10). A store
        outage drops it (logged)."""
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

    async def record_speed(self, target: str, *, ttft_ms: float | None, tokens_per_s: float | None) -> None:
        """Fold one successful attempt's measures into the target's rolling
        averages (SPEC §10: measured by the fleet from its own attempts).

        Args:
            target: the target key.
            ttft_ms: time to first token of a stream, or the whole JSON
                answer, in milliseconds; None leaves the average alone.
            tokens_per_s: completion tokens per second; None leaves it alone.

        A store outage drops the sample (logged; never refuses anything).
        """
        if ttft_ms is None and tokens_per_s is None:
            return
        try:
            async with asyncio.timeout(REQUEST_REDIS_TIMEOUT_S):
                await self._store.record_speed(
                    target,
                    ttft_ms=ttft_ms,
                    tokens_per_s=tokens_per_s,
                    alpha=self._speed_alpha,
                    ttl_s=self._speed_ttl_s,
                )
        except (StateUnavailable, TimeoutError) as exc:
            self._outage(exc, refuse=False)

    def _apply(
        self,
        snap: BreakerSnapshot,
        now: float,
        counted: Counted,
        rest_s: float | None,
        *,
        probe: bool,
        sole: bool,
        error: str,
    ) -> BreakerSnapshot:
        new = record(snap, counted, probe=probe, now_s=now, settings=self.settings, sole=sole, error=error)
        if rest_s is not None:
            new = rest(new, rest_s, now, self.settings)
            if probe and new.open:  # the probe was told to come back later: the next probe waits for it
                new = msgspec.structs.replace(new, opened_at_s=now, cooldown_s=max(new.cooldown_s, rest_s))
        return new

    async def _update(
        self,
        subject: str,
        view: HealthView,
        change: Callable[[BreakerSnapshot, float], BreakerSnapshot],
        speed: SpeedSample | None = None,
        *,
        quiet: bool = False,
    ) -> bool:
        """Compare-and-set `change` of `subject`'s snapshot with whatever else is queued
        (`turnout.health.writes.SnapshotWrites.update`); nothing for a degraded view.
        Returns True when a write carried `speed`.

        Raises:
            StateUnavailable: the store failed the write.
        """
        if view.degraded:
            return False
        return await self._writes.update(subject, view, change, speed, quiet=quiet)

    async def drain(self) -> None:
        """Wait until every result queued so far is written (or failed): a process stopping, a test."""
        await self._writes.drain()

    def _written(self, subject: str, before: BreakerSnapshot, steps: list[tuple[BreakerSnapshot, float]]) -> None:
        """After a stored write: log and count each step's transition."""
        for after, at in steps:
            self._transitioned(subject, before, after, at)
            before = after

    def _transitioned(self, subject: str, old: BreakerSnapshot, new: BreakerSnapshot, now: float) -> None:
        before, after = state_at(old, now), state_at(new, now)
        if before is after and old.opened_at_s == new.opened_at_s:
            return
        if new.open:
            sole = subject in self._sole
            alone = " (the only offer of a model: its requests get 503 until a probe succeeds)" if sole else ""
            if self._on_trip is not None and new.trips > old.trips:
                self._on_trip(subject, new.trip_rule or "-", sole)
            log.warning(
                "breaker %s%s OPEN for %.0f s (trip %d, rule %s): %s",
                subject,
                alone,
                new.cooldown_s,
                new.trips,
                new.trip_rule or "-",
                new.last_error or "-",
            )
        else:
            log.info("breaker %s CLOSED: probe succeeded; slow start for %.0f s", subject, self.settings.slow_start_s)
        if self._on_transition is not None:
            self._on_transition(subject, before, after)


def redis_breakers(
    config: Config,
    redis: Redis,
    catalog: CatalogSource,
    *,
    metrics: Metrics | None = None,
    rng: random.Random | None = None,
    cache_s: float = 0.0,
) -> Breakers:
    """The fleet's `Breakers` over Redis, as every process builds them (one
    place, so the ingress and the workers never drift apart); `cache_s` as in `Breakers`."""
    b, r = config.raw.breaker, config.raw.routing
    return Breakers(
        RedisBreakerStore(redis),
        b.settings(),
        on_store_error=b.on_store_error,
        speed_alpha=r.speed_alpha,
        speed_ttl_s=r.speed_ttl_s,
        on_transition=metrics.on_transition if metrics else None,
        on_alarm=metrics.on_alarm if metrics else None,
        on_trip=metrics.on_trip if metrics else None,
        sole_targets=catalog.current.sole_targets,
        rng=rng,
        cache_s=cache_s,
    )
