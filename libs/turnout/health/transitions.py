"""Breaker transitions as operators see them: logs and metrics hooks (SPEC §5, §9).

Owns: the targets that are a model's only offer (kept in step with the catalog:
their breakers trip later, and their trip is worth saying), and, after each
stored write, a log line and the metrics hooks for every transition it made.
Must not import: services, FastAPI, httpx, Redis.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import msgspec

from turnout.core.breaker import BreakerSettings, BreakerSnapshot, BreakerState, state_at

log = logging.getLogger("turnout.breaker")


class BreakerHooks(msgspec.Struct, frozen=True, kw_only=True):
    """Metrics hooks of the breakers (`turnout.observability.metrics.Metrics`); None: not called.

    Attributes:
        on_transition: called with (subject, old state, new state) after a stored transition.
        on_alarm: called with the target key when the platform key of its provider is
            rejected or out of quota.
        on_trip: called with (subject, rule, sole) after a stored trip.
        on_step: called with (subject, snapshot before, snapshot after, store-clock time in
            epoch s) for each step of a stored write (the breaker timeline, `turnout.observability.breaker_log`).
    """

    on_transition: Callable[[str, BreakerState, BreakerState], None] | None = None
    on_alarm: Callable[[str], None] | None = None
    on_trip: Callable[[str, str, bool], None] | None = None
    on_step: Callable[[str, BreakerSnapshot, BreakerSnapshot, float], None] | None = None


class Transitions:
    """The sole offers, and what is said of each stored transition.

    Args:
        settings: thresholds (the slow start named in a close's log line).
        hooks: the metrics hooks.
        sole_targets: target keys that are the only offer of a model.
    """

    def __init__(
        self, settings: BreakerSettings, hooks: BreakerHooks, sole_targets: frozenset[str] = frozenset()
    ) -> None:
        self._settings = settings
        self._hooks = hooks
        self._sole = sole_targets

    def use_sole_targets(self, sole_targets: frozenset[str]) -> None:
        """Take the sole offers of a new catalog (`turnout.catalog.live`); breaker state is kept."""
        self._sole = sole_targets

    def is_sole(self, target: str) -> bool:
        """Whether `target` is the only offer of a model (the stricter trip thresholds apply)."""
        return target in self._sole

    def written(self, subject: str, before: BreakerSnapshot, steps: list[tuple[BreakerSnapshot, float]]) -> None:
        """After a stored write of `subject` (`turnout.health.writes`): log and count each
        step's transition; `steps` holds each (snapshot, store-clock time) in order."""
        for after, at in steps:
            if self._hooks.on_step is not None:
                self._hooks.on_step(subject, before, after, at)
            self._transitioned(subject, before, after, at)
            before = after

    def _transitioned(self, subject: str, old: BreakerSnapshot, new: BreakerSnapshot, now: float) -> None:
        before, after = state_at(old, now), state_at(new, now)
        if before is after and old.opened_at_s == new.opened_at_s:
            return
        if new.open:
            sole = subject in self._sole
            alone = " (the only offer of a model: its requests get 503 until a probe succeeds)" if sole else ""
            if self._hooks.on_trip is not None and new.trips > old.trips:
                self._hooks.on_trip(subject, new.trip_rule or "-", sole)
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
            log.info("breaker %s CLOSED: probe succeeded; slow start for %.0f s", subject, self._settings.slow_start_s)
        if self._hooks.on_transition is not None:
            self._hooks.on_transition(subject, before, after)
