"""Recording attempts' results into breaker health (SPEC §5 "What counts", transitions).

Owns: the shell of one result: what it writes is the pure decision
`turnout.core.recording.decide`; this module performs it (batched
compare-and-set writes, `turnout.health.writes`), raises the platform-key alarm,
gives back the probe permit the attempt held, and folds in the attempt's speed
measures (with the target's write when there is one). A result is recorded
within `RECORD_TIMEOUT_S`; past it, or on a store outage, it is dropped (the
outage policy; never refused: the attempt already ran).
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from turnout.core.breaker import BreakerSettings
from turnout.core.credentials import Credential
from turnout.core.recording import Change, apply, decide
from turnout.core.types import FailureKind
from turnout.health.outage import OutagePolicy
from turnout.health.probes import ProbePermits
from turnout.health.speed import SpeedAverages
from turnout.health.transitions import Transitions
from turnout.health.view import HealthView
from turnout.health.writes import SnapshotWrites
from turnout.state.bounds import RECORD_TIMEOUT_S as RECORD_BOUND_S
from turnout.state.breaker_store import Speed, SpeedSample
from turnout.state.errors import StateUnavailable

log = logging.getLogger("turnout.breaker")

RECORD_TIMEOUT_S = RECORD_BOUND_S
"""Longest a result's recording (or a permit's release) may take: a committed
stream's end waits for it, so a hung store must not hold the client; past it
the result is not recorded (the store-outage policy) and a permit expires on
its own."""


class ResultWriter:
    """Records attempts' results.

    Args:
        settings: thresholds (how a change applies).
        writes: the batched snapshot writes.
        probes: the probe permits (given back by `record`).
        speed: the rolling speed averages.
        transitions: the sole offers (stricter trips).
        outage: the store-outage policy.
        on_alarm: called with the target key when the platform key of its provider is
            rejected or out of quota (metrics hook).
    """

    def __init__(
        self,
        settings: BreakerSettings,
        writes: SnapshotWrites,
        probes: ProbePermits,
        speed: SpeedAverages,
        transitions: Transitions,
        outage: OutagePolicy,
        *,
        on_alarm: Callable[[str], None] | None = None,
    ) -> None:
        self._settings = settings
        self._writes = writes
        self._probes = probes
        self._speed = speed
        self._transitions = transitions
        self._outage = outage
        self._on_alarm = on_alarm

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
                (`turnout.health.credentials.credential_subject`) for a tenant-owned credential.
            retry_after_s: the response's Retry-After hint, seconds.
            measures: the attempt's measures, folded in by the target's first
                compare-and-set write (one round trip for both), or on their own
                when no write is needed.

        Never raises for a store outage (module doc); writes are compare-and-set,
        retried on conflict with jittered backoff.
        """
        sample = self._speed.sample(measures)
        writes = decide(
            kind,
            credential=credential,
            credential_subject=credential_key is not None,
            retry_after_s=retry_after_s,
            probe=probe_token is not None,
            sole=self._transitions.is_sole(target),
            error=error,
            first_measure=sample is not None and target not in view.speeds,
        )
        if writes.alarm:
            log.error(
                "platform key of %s rejected (%s): operator action needed; not counted against the target", target, kind
            )
            if self._on_alarm is not None:
                self._on_alarm(target)
        try:
            if not view.degraded:
                async with asyncio.timeout(RECORD_TIMEOUT_S):  # a hung store must not hold the answer
                    if writes.target is not None and await self._write(
                        target, view, writes.target, sample, quiet=writes.quiet
                    ):
                        sample = None  # folded in by the write
                    if credential_key is not None and writes.credential is not None:
                        await self._write(credential_key, view, writes.credential)
        except (StateUnavailable, TimeoutError) as exc:
            self._outage(exc, refuse=False)
        finally:
            if probe_token is not None:
                await self._probes.release(target, probe_token)
        if sample is not None:
            await self._speed.record(target, ttft_ms=sample.ttft_ms, tokens_per_s=sample.tokens_per_s)

    async def _write(
        self, subject: str, view: HealthView, change: Change, speed: SpeedSample | None = None, *, quiet: bool = False
    ) -> bool:
        """Compare-and-set `change` of `subject`'s snapshot with whatever else is queued
        (`SnapshotWrites.update`). Returns True when the write carried `speed`.

        Raises:
            StateUnavailable: the store failed the write.
        """
        settings = self._settings
        return await self._writes.update(
            subject, view, lambda snap, now: apply(change, snap, now, settings), speed, quiet=quiet
        )

    async def drain(self) -> None:
        """Wait until every result queued so far is written (or failed): a process stopping, a test."""
        await self._writes.drain()
