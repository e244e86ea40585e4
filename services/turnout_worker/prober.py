"""The fleet's active prober: cheap calls to targets out of rotation, so recovery does not wait for traffic.

Owns: `ActiveProber`, run by every worker (issue #41 item 6; README "Active probes"). Each
round (every `tick_s`): when the catalog has providers with an active probe, take or renew the
fleet's one prober lease (`turnout.state.prober_lease`: only its holder goes on), read the
snapshots of those providers' targets (one round trip), and for each target the pure rule says
is due (`turnout.core.active_probe.probe_due`) start one probe: take the target's probe permit
(the one a client's probe takes, so a client's probe and an active one never both go; taken by a
client, this round skips it), send the provider's cheap call (`turnout.adapters.probe_call`),
classify it as the attempt loop does and record it as a probe's result
(`turnout.health.results.ResultWriter.record`): a success closes the breaker into slow start,
a failure reopens it (SPEC §5), and the permit is given back. Probes run beside the round,
one at a time per target. Time is injected (`clock`, `sleep`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Protocol

import httpx

from turnout.adapters.probe_call import send_probe
from turnout.catalog import CatalogSource
from turnout.config import ProviderConfig
from turnout.config.providers import ProbeConfig
from turnout.core.active_probe import probe_due
from turnout.core.classify import classify
from turnout.core.types import FailureKind, Target
from turnout.health import Breakers
from turnout.scrub import Scrubber
from turnout.state.errors import STATE_ERRORS, StateUnavailable, outage_kind

log = logging.getLogger("turnout.prober")

_OUTAGE: tuple[type[BaseException], ...] = (StateUnavailable, *STATE_ERRORS)
"""What a store outage raises (a round skipped, a probe not recorded)."""

PROBE_TIMEOUT_S = 10.0
"""Longest one active probe's call may take (seconds); past it, a timeout (a failure)."""


class Lease(Protocol):
    """The fleet's prober lease (`turnout.state.prober_lease.ProberLease`)."""

    async def hold(self) -> bool:
        """Take or renew it: whether this worker holds it now."""
        ...

    async def release(self) -> None:
        """Give it back."""
        ...


Probed = tuple[Target, ProviderConfig, ProbeConfig]


def probed_targets(catalog: CatalogSource) -> dict[str, Probed]:
    """The targets of the catalog in force whose provider has an active probe, by target key. A
    `tiny_request` (a chat request) is sent only to chat offers: an embedding model's target or an
    `api: responses` offer is probed only by a `models` call."""
    current = catalog.current
    out: dict[str, Probed] = {}
    for model, targets in current.models.items():
        for target in targets:
            provider = current.providers.get(target.provider)
            probe = provider.active_probe if provider is not None else None
            if provider is None or probe is None:
                continue
            chat = model not in current.embedding_models and current.apis.get(target.key, "chat") == "chat"
            if chat or probe.call_for(provider.kind) == "models":
                out.setdefault(target.key, (target, provider, probe))
    return out


def tick_for(targets: dict[str, Probed]) -> float:
    """Seconds between two rounds: a quarter of the shortest interval, within 0.1–1 s."""
    shortest = min((probe.interval_s for _, _, probe in targets.values()), default=4.0)
    return min(1.0, max(0.1, shortest / 4))


class ActiveProber:
    """Sends the fleet's active probes while this worker holds the prober lease (module doc).

    Args:
        catalog: the catalog in force (providers with `probe.active`, their targets).
        breakers: the fleet's breakers (store reads, probe permits, results).
        http: the shared upstream client.
        lease: the fleet's prober lease.
        scrubber: scrubs upstream texts before they are kept (`last_error`).
        sleep: the wait between rounds (injected in tests).
    """

    def __init__(
        self,
        catalog: CatalogSource,
        breakers: Breakers,
        http: httpx.AsyncClient,
        lease: Lease,
        scrubber: Scrubber,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._catalog = catalog
        self._breakers = breakers
        self._http = http
        self._lease = lease
        self._scrubber = scrubber
        self._sleep = sleep
        self._last: dict[str, float] = {}  # target -> store time of its last probe by this prober
        self._running: dict[str, asyncio.Task[None]] = {}
        self._held = False
        self._task: asyncio.Task[None] | None = None

    async def round(self) -> list[str]:
        """One round (module doc): the targets whose probe it started.

        Raises:
            StateUnavailable: Redis is unreachable (the round is skipped).
        """
        targets = probed_targets(self._catalog)
        if not targets:
            return []
        self._held = await self._lease.hold()
        if not self._held:
            self._last.clear()  # another worker probes: start afresh if the lease comes back
            return []
        loaded = await self._breakers.store.load(list(targets))
        started: list[str] = []
        for key, (target, provider, probe) in targets.items():
            if key in self._running:
                continue
            snapshot = loaded.entries[key].snapshot
            if probe_due(snapshot, loaded.now_s, probe.interval_s, self._last.get(key)):
                self._last[key] = loaded.now_s
                task = asyncio.get_running_loop().create_task(self._probe(target, provider, probe), name=f"probe {key}")
                self._running[key] = task
                task.add_done_callback(self._ended)
                started.append(key)
        return started

    def _ended(self, task: asyncio.Task[None]) -> None:
        """A probe ended: its target may be probed again."""
        for key, running in list(self._running.items()):
            if running is task:
                del self._running[key]

    async def _probe(self, target: Target, provider: ProviderConfig, probe: ProbeConfig) -> None:
        """One active probe of `target`, holding its permit (module doc); never raises."""
        key, permits = target.key, self._breakers.probes
        try:
            token = await permits.acquire(key)
            if token is None:
                return  # a client's probe holds the permit
            permits.hold(key, token)
            call = probe.call_for(provider.kind)
            rid = f"probe-{secrets.token_hex(6)}"
            result = await send_probe(
                self._http, provider, target, call=call, timeout_s=PROBE_TIMEOUT_S, request_id=rid
            )
            outcome = self._scrubber.outcome(result.outcome, extra=provider.secrets())
            kind = classify(outcome)
            status = outcome.status if outcome.status is not None else "no status"
            error = "" if kind is FailureKind.SUCCESS else f"{status}: {outcome.message}"[:200]
            view = await self._breakers.reads.view([key])
            await self._breakers.results.record(
                key, kind, probe_token=token, error=error, view=view, retry_after_s=outcome.retry_after_s
            )
            log.info("active probe of %s (%s): %s", key, call, kind)
        except _OUTAGE as exc:
            log.warning("active probe of %s not recorded (%s)", key, outage_kind(exc))
        except Exception:  # a bug must not end the prober
            log.exception("active probe of %s failed inside the gateway", key)

    async def run(self) -> None:
        """Rounds until cancelled, each `tick_for` the probed targets apart; a store outage skips a round."""
        while True:
            try:
                await self.round()
            except _OUTAGE as exc:
                log.debug("active prober skipped a round (%s)", outage_kind(exc))
            await self._sleep(tick_for(probed_targets(self._catalog)))

    def start(self) -> None:
        """Start `run` as a task of the running loop."""
        self._task = asyncio.get_running_loop().create_task(self.run(), name="turnout-active-prober")

    async def stop(self) -> None:
        """Stop the rounds and the probes in flight (their permits expire on their own), and give
        the lease back (a store outage: it expires on its own)."""
        task, self._task = self._task, None
        tasks = [t for t in (task, *self._running.values()) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._held:
            with contextlib.suppress(*_OUTAGE):
                await asyncio.wait_for(self._lease.release(), 1.0)


def lease_ttl_s(tick_s: float = 1.0) -> float:
    """The prober lease's lifetime: three of the longest rounds, so a renewal late by a round keeps it."""
    return max(3.0, 3 * tick_s)
