"""Circuit breaker per (provider, model) as pure transitions (SPEC §5).

Owns: the breaker snapshot, what it admits at a given time, and how one
counted result changes it. Storage (shared Redis, or memory) only loads and
stores snapshots; the probe permit of HALF_OPEN is the store's atomic
`SET NX PX`, so exactly one probe runs fleet-wide.
Must not import: anything outside the standard library, msgspec and
`turnout.core`. Time is a float of seconds from the store's clock (Redis
`TIME`), so hosts need not agree on the time.

States:
    CLOSED     admits everything; N consecutive counted failures, or a failure
               rate over the last `window` results (at least `min_results`),
               open it.
    OPEN       admits nothing until `opened_at_s + cooldown_s`.
    HALF_OPEN  (OPEN whose cooldown has passed) admits exactly one probe,
               the holder of the permit; the probe's success closes the
               breaker, its failure reopens it with a longer cooldown
               (doubling per consecutive trip, capped at `max_cooldown_s`).
Client errors, cancellations and missing credentials never count.
"""

from __future__ import annotations

import enum

import msgspec


class BreakerState(enum.StrEnum):
    """The three breaker states (SPEC §5)."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class Counted(enum.StrEnum):
    """How one attempt's result counts for the breaker and health."""

    SUCCESS = "success"
    FAILURE = "failure"
    NEUTRAL = "neutral"  # client error, cancellation, no credential: never counts


class BreakerSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Thresholds (SPEC §11 `breaker:`); durations in seconds.

    Attributes:
        consecutive_failures: counted failures in a row that open a CLOSED breaker.
        window: results kept per target (health ordering and the rate rule).
        failure_rate: failure share over the window that opens the breaker;
            values above 1.0 disable the rule.
        min_results: results the window needs before the rate rule applies.
        cooldown_s: first OPEN duration.
        max_cooldown_s: cap of the growing cooldown.
        probe_ttl_s: lifetime of a probe permit (frees the slot of a probe
            whose worker died).
    """

    consecutive_failures: int = 3
    window: int = 50
    failure_rate: float = 1.0
    min_results: int = 20
    cooldown_s: float = 30.0
    max_cooldown_s: float = 300.0
    probe_ttl_s: float = 30.0


class BreakerSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """Everything stored for one target.

    Attributes:
        open: True once tripped (OPEN, or HALF_OPEN after the cooldown).
        consecutive_failures: counted failures in a row while CLOSED.
        trips: consecutive trips without a successful probe (grows cooldown).
        opened_at_s: store-clock time of the last trip.
        cooldown_s: current OPEN duration.
        window: last results, oldest first: "1" success, "0" failure.
        last_error: short description of the last counted failure.
    """

    open: bool = False
    consecutive_failures: int = 0
    trips: int = 0
    opened_at_s: float = 0.0
    cooldown_s: float = 0.0
    window: str = ""
    last_error: str = ""


CLOSED = BreakerSnapshot()
"""A target with no history: CLOSED and healthy."""


class Admission(enum.StrEnum):
    """What `admit` allows."""

    ADMIT = "admit"  # CLOSED: go
    PROBE = "probe"  # HALF_OPEN: go only with the probe permit
    REJECT = "reject"  # OPEN: skip this target


def state_at(snapshot: BreakerSnapshot, now_s: float) -> BreakerState:
    """The breaker's state at `now_s` (HALF_OPEN is OPEN past its cooldown)."""
    if not snapshot.open:
        return BreakerState.CLOSED
    if now_s >= snapshot.opened_at_s + snapshot.cooldown_s:
        return BreakerState.HALF_OPEN
    return BreakerState.OPEN


def admit(snapshot: BreakerSnapshot, now_s: float) -> Admission:
    """Whether an attempt may go to this target now (SPEC §5)."""
    state = state_at(snapshot, now_s)
    if state is BreakerState.CLOSED:
        return Admission.ADMIT
    if state is BreakerState.HALF_OPEN:
        return Admission.PROBE
    return Admission.REJECT


def reopen_in_s(snapshot: BreakerSnapshot, now_s: float) -> float:
    """Seconds until an OPEN breaker admits a probe (0 when not OPEN)."""
    if not snapshot.open:
        return 0.0
    return max(0.0, snapshot.opened_at_s + snapshot.cooldown_s - now_s)


def cooldown_for(trips: int, settings: BreakerSettings) -> float:
    """OPEN duration after `trips` consecutive trips: `cooldown_s · 2^(trips-1)`, capped."""
    exponent = min(max(trips - 1, 0), 30)
    return float(min(settings.max_cooldown_s, settings.cooldown_s * (2**exponent)))


def success_rate(snapshot: BreakerSnapshot) -> float | None:
    """Share of successes over the window, or None with no history."""
    if not snapshot.window:
        return None
    return snapshot.window.count("1") / len(snapshot.window)


def _trip(snapshot: BreakerSnapshot, now_s: float, settings: BreakerSettings, window: str, error: str) -> BreakerSnapshot:
    trips = snapshot.trips + 1
    return BreakerSnapshot(
        open=True, consecutive_failures=0, trips=trips, opened_at_s=now_s,
        cooldown_s=cooldown_for(trips, settings), window=window, last_error=error,
    )


def _rate_trips(window: str, settings: BreakerSettings) -> bool:
    if settings.failure_rate > 1.0 or len(window) < max(settings.min_results, 1):
        return False
    return window.count("0") / len(window) >= settings.failure_rate


def record(
    snapshot: BreakerSnapshot,
    counted: Counted,
    *,
    probe: bool,
    now_s: float,
    settings: BreakerSettings,
    error: str = "",
) -> BreakerSnapshot:
    """The snapshot after one attempt's result (SPEC §5 transitions).

    Args:
        snapshot: the stored snapshot the result applies to.
        counted: how the result counts.
        probe: the attempt held the HALF_OPEN probe permit.
        now_s: store-clock time of the result.
        settings: thresholds.
        error: short description of a failure (kept as `last_error`).

    Returns:
        The new snapshot (equal to `snapshot` when nothing changes):
        - NEUTRAL changes nothing.
        - CLOSED: a success resets the failure run; a failure extends it and
          trips the breaker at `consecutive_failures` or by the rate rule.
        - OPEN / HALF_OPEN: the probe's success closes (window and trips
          reset); the probe's failure reopens with a longer cooldown. Results
          of attempts admitted before the trip only enter the window.
    """
    if counted is Counted.NEUTRAL:
        return snapshot
    mark = "1" if counted is Counted.SUCCESS else "0"
    window = (snapshot.window + mark)[-max(settings.window, 1):]
    if snapshot.open:
        if not probe:
            return msgspec.structs.replace(snapshot, window=window)
        if counted is Counted.SUCCESS:
            return BreakerSnapshot(window="1")
        return _trip(snapshot, now_s, settings, window, error or snapshot.last_error)
    if counted is Counted.SUCCESS:
        return msgspec.structs.replace(snapshot, consecutive_failures=0, window=window)
    failures = snapshot.consecutive_failures + 1
    if failures >= settings.consecutive_failures or _rate_trips(window, settings):
        return _trip(snapshot, now_s, settings, window, error)
    return msgspec.structs.replace(snapshot, consecutive_failures=failures, window=window, last_error=error)
