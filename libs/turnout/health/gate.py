"""Admitting one attempt to a target (SPEC §5): the breaker, the probe permit, slow start, "not before".

Owns: the shell of `turnout.core.breaker.admit` for one attempt: a stale view is
read again first (`turnout.health.reads`), a HALF_OPEN target's probe permit is
taken and held (`turnout.health.probes`), the slow-start share is paced
(`turnout.health.slow_start`), and the decision becomes a `Gate`.
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

import logging

import msgspec

from turnout.core.breaker import Admission, BreakerSettings, BreakerSnapshot, admit, reopen_in_s, unavailable_for_s
from turnout.core.loop import SkipReason
from turnout.health.outage import OutagePolicy
from turnout.health.probes import ProbePermits
from turnout.health.reads import HealthReads
from turnout.health.slow_start import SlowStart
from turnout.health.view import HealthView
from turnout.state.errors import StateUnavailable

log = logging.getLogger("turnout.breaker")

RAMP_RETRY_S = 1.0
"""Seconds a request left out by slow start (or by a probe in flight) is told to wait."""


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


ADMITTED = Gate(admitted=True)


def refusal(decision: Admission, snap: BreakerSnapshot, now_s: float) -> Gate:
    """The `Gate` of a decision that is not a probe, at store-clock `now_s` (epoch s)."""
    if decision is Admission.ADMIT:
        return ADMITTED
    if decision is Admission.REST:
        return Gate(admitted=False, reopen_in_s=unavailable_for_s(snap, now_s), reason=SkipReason.RESTING)
    if decision is Admission.RAMP:
        return Gate(admitted=False, reopen_in_s=RAMP_RETRY_S, reason=SkipReason.RAMPING)
    return Gate(admitted=False, reopen_in_s=max(reopen_in_s(snap, now_s), 0.0), reason=SkipReason.CIRCUIT_OPEN)


class TargetGate:
    """Admission of attempts to targets.

    Args:
        settings: thresholds.
        reads: re-reads a stale view.
        probes: the probe permits.
        slow_start: the pacing of slow start.
        outage: the store-outage policy.
    """

    def __init__(
        self,
        settings: BreakerSettings,
        reads: HealthReads,
        probes: ProbePermits,
        slow_start: SlowStart,
        outage: OutagePolicy,
    ) -> None:
        self._settings = settings
        self._reads = reads
        self._probes = probes
        self._slow_start = slow_start
        self._outage = outage

    def _decide(self, target: str, view: HealthView, now_s: float) -> tuple[Admission, BreakerSnapshot]:
        snap = view.snapshot(target)
        return admit(snap, now_s, self._settings, self._slow_start.draw(target, snap, now_s)), snap

    async def _ramp(self, target: str, snap: BreakerSnapshot, now_s: float) -> Gate:
        """An admitted attempt, unless slow start by rate has no call left for it this moment
        (`SlowStart.by_rate`; a store outage: the outage policy)."""
        try:
            wait_s = await self._slow_start.by_rate(target, snap, now_s)
        except (StateUnavailable, TimeoutError) as exc:
            self._outage(exc)
            return ADMITTED
        if wait_s <= 0:
            return ADMITTED
        return Gate(admitted=False, reopen_in_s=min(wait_s, RAMP_RETRY_S), reason=SkipReason.RAMPING)

    async def admit(self, target: str, view: HealthView) -> Gate:
        """Whether an attempt may go to `target` now (SPEC §5).

        Takes the probe permit in HALF_OPEN (renewed until
        `turnout.health.results.ResultWriter.record` gives it back); applies the
        slow start (by rate: one call of the fleet's shared counter; or the share) and the
        provider's "not before". A degraded view admits.

        Raises:
            GatewayUnavailable: the store is unreachable and the policy is `fail`.
        """
        if view.degraded or not await self._reads.fresh(target, view):
            return ADMITTED
        now = view.store_now()
        decision, snap = self._decide(target, view, now)
        if decision is Admission.ADMIT:
            return await self._ramp(target, snap, now)
        if decision is not Admission.PROBE:
            return refusal(decision, snap, now)
        try:
            token = await self._probes.acquire(target)
        except (StateUnavailable, TimeoutError) as exc:
            self._outage(exc)
            return ADMITTED
        if token is None:
            return Gate(admitted=False, reopen_in_s=RAMP_RETRY_S, reason=SkipReason.CIRCUIT_OPEN)
        # The view may predate a probe that has since ended (and given the permit
        # back): decide again on the snapshot as stored now, holding the permit.
        try:
            await self._reads.reread(target, view)
        except (StateUnavailable, TimeoutError) as exc:
            self._outage(exc)
            self._probes.hold(target, token)
            return Gate(admitted=True, probe_token=token)  # we hold the permit: the result's record gives it back
        decision, snap = self._decide(target, view, view.now_s)
        if decision is Admission.PROBE:
            log.info("breaker %s HALF_OPEN: probe admitted", target)
            self._probes.hold(target, token)
            return Gate(admitted=True, probe_token=token)
        await self._probes.release(target, token)
        if decision is Admission.ADMIT:  # closed by the probe that just ended: slow start applies
            return await self._ramp(target, snap, view.now_s)
        return refusal(decision, snap, view.now_s)
