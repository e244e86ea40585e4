"""Breakers: the shell around the pure breaker core and its shared store (SPEC §5, §10).

Owns: `Breakers`, the one handle callers hold: a frozen bundle of small parts,
each with one job, wired once by `Breakers.over` (for the fleet, by
`turnout.runtime.build_runtime`). Its modules:
    view         one request's read (`HealthView`)
    reads        reading health, kept a moment (`HealthReads`)
    seen         the latest snapshot seen per subject (`LatestSeen`)
    gate         admitting an attempt (`TargetGate`, `Gate`)
    probes       the HALF_OPEN probe permit, renewed while the probe runs (`ProbePermits`)
    slow_start   the slow-start share after a close (`SlowStart`)
    credentials  tenants' own credentials (`CredentialHealth`)
    results      recording results (`ResultWriter`; the decision is `turnout.core.recording`)
    writes       the batched compare-and-set writes (`SnapshotWrites`)
    transitions  logs and metrics hooks of transitions, the sole offers (`Transitions`)
    plan_caps    usage caps until they reset (`PlanCaps`)
    speed        the rolling speed averages (`SpeedAverages`)
    outage       the store-outage policy (`OutagePolicy`)
Clock and RNG are injected.
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

import random
import time

import msgspec

from turnout.core.breaker import BreakerSettings
from turnout.core.ordering import OrderSettings
from turnout.health.credentials import CredentialHealth, credential_subject
from turnout.health.gate import RAMP_RETRY_S, Gate, TargetGate
from turnout.health.outage import OutagePolicy, StoreErrorPolicy
from turnout.health.plan_caps import PLAN_CAP_MAX_S, PlanCaps, plan_cap_scope
from turnout.health.probes import MAX_PROBE_HOLD_S, ProbePermits
from turnout.health.reads import STALE_AFTER_S, HealthReads
from turnout.health.results import RECORD_TIMEOUT_S, ResultWriter
from turnout.health.seen import LatestSeen
from turnout.health.slow_start import SlowStart
from turnout.health.speed import SpeedAverages
from turnout.health.transitions import BreakerHooks, Transitions
from turnout.health.view import Clock, HealthView
from turnout.health.writes import QUIET_WINDOW_S, SnapshotWrites, lost_write_logger
from turnout.state.breaker_store import BreakerStore

NO_HOOKS = BreakerHooks()
"""No metrics hooks (tests, a router built without a runtime)."""

__all__ = [
    "MAX_PROBE_HOLD_S",
    "PLAN_CAP_MAX_S",
    "RAMP_RETRY_S",
    "RECORD_TIMEOUT_S",
    "STALE_AFTER_S",
    "BreakerHooks",
    "Breakers",
    "Clock",
    "Gate",
    "HealthView",
    "StoreErrorPolicy",
    "credential_subject",
    "plan_cap_scope",
]


class Breakers(msgspec.Struct, frozen=True, kw_only=True):
    """Fleet-wide breakers, health and credential health: the parts, each with one job.

    Attributes:
        settings: thresholds.
        store: where snapshots, permits, caps and measures live.
        reads: `view` (one round trip per request, kept a moment), `shipped_view`, `forget`.
        gate: `admit` one attempt to a target.
        probes: the HALF_OPEN probe permits (`acquire`, `hold`, `release`): the gate takes a client's,
            the fleet's active prober its own (`turnout_worker.prober`).
        credentials: `admits` a tenant's own credential.
        results: `record` one attempt's result; `drain` the writes queued.
        plan_caps: `cap` a scope's usage cap on a target.
        speed: `record` measures on their own.
        transitions: `use_sole_targets` of a new catalog.
    """

    settings: BreakerSettings
    store: BreakerStore
    reads: HealthReads
    gate: TargetGate
    probes: ProbePermits
    credentials: CredentialHealth
    results: ResultWriter
    plan_caps: PlanCaps
    speed: SpeedAverages
    transitions: Transitions

    @property
    def order_settings(self) -> OrderSettings:
        """The ordering strategies' knobs that come with the breaker settings."""
        return OrderSettings(tolerance=self.settings.tolerance, explore=self.settings.explore)

    @classmethod
    def over(
        cls,
        store: BreakerStore,
        settings: BreakerSettings,
        *,
        on_store_error: StoreErrorPolicy = "closed",
        hooks: BreakerHooks = NO_HOOKS,
        sole_targets: frozenset[str] = frozenset(),
        speed_alpha: float = 0.2,
        speed_ttl_s: int = 3600,
        clock: Clock = time.monotonic,
        wall: Clock = time.time,
        rng: random.Random | None = None,
        cache_s: float = 0.0,
        quiet_window_s: float = QUIET_WINDOW_S,
    ) -> Breakers:
        """The parts over `store`, wired together.

        Args:
            store: where snapshots live.
            settings: thresholds.
            on_store_error: the outage policy (`turnout.health.outage`).
            hooks: the metrics hooks.
            sole_targets: target keys that are the only offer of a model.
            speed_alpha, speed_ttl_s: the rolling speed averages' weight and lifetime (s).
            clock: monotonic seconds (view ages, log throttling, the probe hold cap).
            wall: epoch seconds (the store clock of a degraded view).
            rng: jitter of compare-and-set retries.
            cache_s: seconds a health read serves later reads of the same subjects
                (`HealthReads`; 0: every view reads).
            quiet_window_s: longest a plain success waits for others of its subject
                to share its write (seconds; `turnout.health.writes.QUIET_WINDOW_S`).
        """
        outage = OutagePolicy(on_store_error, clock=clock)
        seen = LatestSeen()
        transitions = Transitions(settings, hooks, sole_targets)
        reads = HealthReads(store, seen, outage, clock=clock, wall=wall, cache_s=cache_s)
        writes = SnapshotWrites(
            store,
            seen,
            clock=clock,
            rng=rng or random.Random(),
            on_written=transitions.written,
            on_announced=reads.forget,
            on_lost=lost_write_logger(lambda exc: outage(exc, refuse=False)),
            quiet_window_s=quiet_window_s,
        )
        probes = ProbePermits(store, settings.probe_ttl_s, outage, clock=clock)
        speed = SpeedAverages(store, outage, alpha=speed_alpha, ttl_s=speed_ttl_s)
        return cls(
            settings=settings,
            store=store,
            reads=reads,
            gate=TargetGate(settings, reads, probes, SlowStart(settings, store), outage),
            probes=probes,
            credentials=CredentialHealth(reads),
            results=ResultWriter(settings, writes, probes, speed, transitions, outage, on_alarm=hooks.on_alarm),
            plan_caps=PlanCaps(store, outage),
            speed=speed,
            transitions=transitions,
        )
