"""Circuit breaker and health of one target, as pure transitions over time (SPEC §5).

Owns: the stored snapshot of a (provider, model) target (or of a tenant's
credential), its time-decayed health counts, what it admits at a given time
(closed, open, half-open probe, slow-start share, a provider's "not before"),
and how one counted result changes it (the trip rules, the cooldown, the
close). Storage (shared Redis, or memory) only loads and stores snapshots;
the probe permit of HALF_OPEN is the store's atomic `SET NX PX`, so exactly
one probe runs fleet-wide.
Must not import: anything outside the standard library, msgspec and
`turnout.core`. Time is a float of seconds from the store's clock (Redis
`TIME`), so hosts need not agree on the time.

Health counts. Successes and failures are kept as two exponentially decayed
counts (half-life `window / 4` s: results older than `window` s weigh under
1/16), beside the length and the decayed weight of the current run of
consecutive failures. Old failures fade without traffic: the score only
rises while no new failure arrives (`score` is monotone in time).

States:
    CLOSED     admits everything (within the slow-start share after a close,
               and not before a provider's Retry-After). Opens on either rule:
               - run rule: a run of consecutive counted failures that would be
                 a one-in-`1/run_chance` event at the failure rate the target
                 showed before the run (at least `consecutive_failures` long),
                 so 10 % random errors do not open it and a healthy target
                 that goes hard down opens within about 3 calls;
               - rate rule: a failure share of at least `failure_rate` over at
                 least `min_results` decayed calls.
               A model's only target opens only at a high failure rate, since
               opening it refuses every request of that model: its run must
               be `sole_consecutive_failures` (20) long, its share
               `sole_failure_rate` (90 %).
    OPEN       admits nothing until `opened_at_s + cooldown_s`.
    HALF_OPEN  (OPEN whose cooldown has passed) admits exactly one probe, the
               holder of the permit; the probe's success closes the breaker
               (the outage's counts are cleared and slow start begins), its
               failure reopens it with a doubled cooldown, capped at
               `max_cooldown_s` (20 s by default, so a provider healed after
               a long outage is back in rotation within 30 s).
Client errors, cancellations and missing credentials never count.
"""

from __future__ import annotations

import enum
import math
from typing import Annotated

import msgspec
from msgspec import Meta


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


class TripRule(enum.StrEnum):
    """Which rule opened a breaker (metrics and logs)."""

    RUN = "run"  # consecutive failures
    RATE = "rate"  # failure share over the window
    PROBE = "probe"  # the half-open probe failed


PRIOR_SUCCESSES = 2.0
"""Pseudo-successes added to every score: a target with no recent data scores
1.0, and one failure alone does not sink a target to 0."""

PRIOR_FAILURES = 0.1
"""Pseudo-failures of the baseline rate of the run rule: with no history the
run rule asks for about 5 failures in a row, after ~10 successes for 3."""

NOT_BEFORE_SLACK_S = 0.5
"""A provider's "not before" admits this many seconds early: the request that
got the hint retries on its own monotonic clock, a hair before the store's."""


MOST_S = 86_400.0
"""The longest breaker duration (seconds: a day). A larger cooldown, window or probe lifetime meant
nothing the breaker could use, and overflowed Redis's expiries (a probe permit's `PX`)."""
MOST_COUNT = 2**31 - 1
"""The largest breaker count (failures in a run, results in a window)."""


class BreakerSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Thresholds (SPEC §5, §11 `breaker:`); durations in seconds.

    Ranges are checked when a configuration is decoded (msgspec `Meta`);
    `max_cooldown_s >= cooldown_s` by `turnout.config`.

    Attributes:
        consecutive_failures: shortest run of counted failures that opens a
            CLOSED breaker (run rule).
        sole_consecutive_failures: the same for a model's only target
            (20: a run that long at 50 % random errors is a one-in-a-million
            event, while a hard-down target gets there in 10 requests).
        run_chance: a run opens the breaker when a run that long would have
            this probability or less at the target's failure rate before it.
        window: seconds of history the health counts keep (half-life
            `window / 4`).
        failure_rate: failure share over the window that opens the breaker
            (rate rule); values above 1.0 disable the rule.
        sole_failure_rate: the same for a model's only target.
        min_results: decayed calls the window needs before the rate rule applies.
        cooldown_s: first OPEN duration.
        max_cooldown_s: cap of the doubling cooldown.
        probe_ttl_s: lifetime of a probe permit; renewed every third of it
            while the probe runs, so a dead worker's permit frees itself.
        slow_start_s: after a close, seconds over which the target's share of
            the attempts offered to it grows to 100 %.
        slow_start_min_share: that share right after the close.
        slow_start_rps: the ramp by rate: calls per second the whole fleet
            sends a target in slow start at the ramp's end; at `t` s after
            the close it is `ramp_share(t) · slow_start_rps` (5/s right after
            the close at the defaults), whatever the offered load
            (`turnout.core.ramp.ramp_rate`); 0 turns the rate off and slow start admits
            `ramp_share` of the attempts each process is offered instead.
        tolerance: health scores this close are ties (ordering `health`).
        explore: share of requests that try a degraded but closed target
            first, so its score can recover.
        max_not_before_s: cap of a provider's Retry-After kept fleet-wide.
    """

    consecutive_failures: Annotated[int, Meta(ge=1, le=MOST_COUNT)] = 3
    sole_consecutive_failures: Annotated[int, Meta(ge=1, le=MOST_COUNT)] = 20
    run_chance: Annotated[float, Meta(gt=0.0, lt=1.0)] = 1e-6
    window: Annotated[float, Meta(gt=0.0, le=MOST_S)] = 20.0
    failure_rate: Annotated[float, Meta(gt=0.0)] = 0.5
    sole_failure_rate: Annotated[float, Meta(gt=0.0)] = 0.9
    min_results: Annotated[float, Meta(ge=1.0, le=MOST_COUNT)] = 10.0
    cooldown_s: Annotated[float, Meta(gt=0.0, le=MOST_S)] = 5.0
    max_cooldown_s: Annotated[float, Meta(gt=0.0, le=MOST_S)] = 20.0
    probe_ttl_s: Annotated[float, Meta(ge=0.3, le=MOST_S)] = 10.0
    slow_start_s: Annotated[float, Meta(ge=0.0, le=MOST_S)] = 10.0
    slow_start_min_share: Annotated[float, Meta(gt=0.0, le=1.0)] = 0.1
    slow_start_rps: Annotated[float, Meta(ge=0.0, le=1_000_000.0)] = 50.0
    tolerance: Annotated[float, Meta(ge=0.0, le=1.0)] = 0.05
    explore: Annotated[float, Meta(ge=0.0, le=1.0)] = 0.05
    max_not_before_s: Annotated[float, Meta(ge=0.0, le=MOST_S)] = 300.0

    @property
    def half_life_s(self) -> float:
        """Half-life of the health counts, seconds."""
        return max(self.window, 1e-3) / 4.0


class BreakerSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """Everything stored for one target.

    Attributes:
        open: True once tripped (OPEN, or HALF_OPEN after the cooldown).
        trips: consecutive trips without a successful probe (grows the cooldown).
        opened_at_s: store-clock time of the last trip.
        cooldown_s: current OPEN duration.
        closed_at_s: store-clock time of the last close by a probe (slow
            start runs from it); 0.0 for never.
        successes: decayed count of successes, valued at `counted_at_s`.
        failures: decayed count of failures (the current run included).
        run_weight: the decayed weight of the current run within `failures`.
        counted_at_s: store-clock time the decayed counts are valued at.
        run: counted failures in a row (the current run).
        not_before_s: a provider's Retry-After: no attempt before this
            store-clock time (0.0 for none).
        last_error: short description of the last counted failure.
        trip_rule: the rule of the last trip ("" never tripped).
    """

    open: bool = False
    trips: int = 0
    opened_at_s: float = 0.0
    cooldown_s: float = 0.0
    closed_at_s: float = 0.0
    successes: float = 0.0
    failures: float = 0.0
    run_weight: float = 0.0
    counted_at_s: float = 0.0
    run: int = 0
    not_before_s: float = 0.0
    last_error: str = ""
    trip_rule: str = ""


CLOSED = BreakerSnapshot()
"""A target with no history: CLOSED and healthy."""


class Admission(enum.StrEnum):
    """What `admit` allows."""

    ADMIT = "admit"  # CLOSED: go
    PROBE = "probe"  # HALF_OPEN: go only with the probe permit
    REJECT = "reject"  # OPEN: skip this target
    REST = "rest"  # the provider asked for no calls before `not_before_s`
    RAMP = "ramp"  # slow start: this attempt is outside the admitted share


# --------------------------------------------------------------------------
# Health counts
# --------------------------------------------------------------------------


def decay(snapshot: BreakerSnapshot, now_s: float, settings: BreakerSettings) -> float:
    """The factor in (0, 1] the counts of `snapshot` lose by `now_s` (1.0 for
    a time at or before `counted_at_s`)."""
    age = max(0.0, now_s - snapshot.counted_at_s)
    return float(0.5 ** (age / settings.half_life_s))


def counts(snapshot: BreakerSnapshot, now_s: float, settings: BreakerSettings) -> tuple[float, float]:
    """(successes, failures) valued at `now_s`; failures include the current run."""
    d = decay(snapshot, now_s, settings)
    return snapshot.successes * d, snapshot.failures * d


def score(snapshot: BreakerSnapshot, now_s: float, settings: BreakerSettings) -> float:
    """Health score in (0, 1] at `now_s` (SPEC §5 "Health score").

    `(PRIOR + s) / (PRIOR + s + f)` over the decayed counts: 1.0 with no
    failure in the window (and with no data at all); never decreasing while
    no new failure arrives.
    """
    s, f = counts(snapshot, now_s, settings)
    return (PRIOR_SUCCESSES + s) / (PRIOR_SUCCESSES + s + f)


def calls(snapshot: BreakerSnapshot, now_s: float, settings: BreakerSettings) -> float:
    """Decayed number of counted results at `now_s` (the rate rule's volume)."""
    s, f = counts(snapshot, now_s, settings)
    return s + f


# --------------------------------------------------------------------------
# States and admission
# --------------------------------------------------------------------------


def state_at(snapshot: BreakerSnapshot, now_s: float) -> BreakerState:
    """The breaker's state at `now_s` (HALF_OPEN is OPEN past its cooldown)."""
    if not snapshot.open:
        return BreakerState.CLOSED
    if now_s >= snapshot.opened_at_s + snapshot.cooldown_s:
        return BreakerState.HALF_OPEN
    return BreakerState.OPEN


def reopen_in_s(snapshot: BreakerSnapshot, now_s: float) -> float:
    """Seconds until an OPEN breaker admits a probe (0 when not OPEN)."""
    if not snapshot.open:
        return 0.0
    return max(0.0, snapshot.opened_at_s + snapshot.cooldown_s - now_s)


def resting_for_s(snapshot: BreakerSnapshot, now_s: float) -> float:
    """Seconds left of a provider's "not before" (0 when none is in force)."""
    return max(0.0, snapshot.not_before_s - NOT_BEFORE_SLACK_S - now_s)


def unavailable_for_s(snapshot: BreakerSnapshot, now_s: float) -> float:
    """Seconds until the target may be attempted again: OPEN or resting (0 when it may now)."""
    if state_at(snapshot, now_s) is BreakerState.HALF_OPEN:
        return resting_for_s(snapshot, now_s)
    return max(reopen_in_s(snapshot, now_s), resting_for_s(snapshot, now_s))


def ramp_share(snapshot: BreakerSnapshot, now_s: float, settings: BreakerSettings) -> float:
    """Share in (0, 1] of attempts a CLOSED target admits at `now_s` (slow start).

    Linear from `slow_start_min_share` at the close to 1.0 after
    `slow_start_s`; 1.0 for a target that never closed after a trip.
    """
    if snapshot.open or snapshot.closed_at_s <= 0.0 or settings.slow_start_s <= 0:
        return 1.0
    elapsed = now_s - snapshot.closed_at_s
    if elapsed >= settings.slow_start_s:
        return 1.0
    low = min(max(settings.slow_start_min_share, 0.0), 1.0)
    return max(low, low + (1.0 - low) * max(elapsed, 0.0) / settings.slow_start_s)


def pace(credit: float, share: float) -> tuple[bool, float]:
    """Admit attempts at exactly `share` of those offered, with no burst (slow start).

    An accumulator: each offered attempt adds `share` to `credit`; one whose
    credit reaches 1.0 is admitted and spends it. Over any run of n offered
    attempts, at most `ceil(share · n + credit)` are admitted: never more
    than the configured ramp plus one, unlike independent random draws.

    Args:
        credit: the accumulator before this attempt, in [0, 1) (0.0 at a close).
        share: the admitted share now (`ramp_share`), in (0, 1].

    Returns:
        (admitted, the new credit).
    """
    credit += min(max(share, 0.0), 1.0)
    if credit >= 1.0 - 1e-9:
        return True, max(credit - 1.0, 0.0)
    return False, credit


def admit(snapshot: BreakerSnapshot, now_s: float, settings: BreakerSettings, draw: float = 0.0) -> Admission:
    """Whether an attempt may go to this target now (SPEC §5).

    Args:
        snapshot: the target's stored snapshot.
        now_s: store-clock time.
        settings: thresholds (slow start).
        draw: a number in [0, 1] compared with the slow-start share: below
            it admits (0.0 always admits, 1.0 never while the share is
            below 1); the shell draws it from `pace`.

    Returns:
        REST while a provider's "not before" holds (whatever the state),
        REJECT while OPEN, PROBE when HALF_OPEN, RAMP when slow start leaves
        this attempt out, else ADMIT.
    """
    if resting_for_s(snapshot, now_s) > 0:
        return Admission.REST
    state = state_at(snapshot, now_s)
    if state is BreakerState.OPEN:
        return Admission.REJECT
    if state is BreakerState.HALF_OPEN:
        return Admission.PROBE
    if draw >= ramp_share(snapshot, now_s, settings):
        return Admission.RAMP
    return Admission.ADMIT


def cooldown_for(trips: int, settings: BreakerSettings) -> float:
    """OPEN duration after `trips` consecutive trips: `cooldown_s · 2^(trips-1)`, capped."""
    exponent = min(max(trips - 1, 0), 30)
    return float(min(settings.max_cooldown_s, settings.cooldown_s * (2**exponent)))


def rest(snapshot: BreakerSnapshot, retry_after_s: float, now_s: float, settings: BreakerSettings) -> BreakerSnapshot:
    """The snapshot with a provider's Retry-After kept as "not before" (SPEC §5).

    The hint is capped at `max_not_before_s`; a later "not before" already
    stored is kept.
    """
    until = now_s + min(max(retry_after_s, 0.0), settings.max_not_before_s)
    if until <= snapshot.not_before_s:
        return snapshot
    return msgspec.structs.replace(snapshot, not_before_s=until)


# --------------------------------------------------------------------------
# Trip rules
# --------------------------------------------------------------------------


def run_needed(snapshot: BreakerSnapshot, now_s: float, settings: BreakerSettings, *, sole: bool) -> int:
    """Length of a failure run that opens the breaker (the run rule).

    The baseline failure rate `p = (f + PRIOR_FAILURES) / (s + f + PRIOR_SUCCESSES)`
    is taken over the decayed counts before the run; the run needed is the
    smallest n with `p^n <= run_chance`, at least `consecutive_failures`
    (`sole_consecutive_failures` for a model's only target).
    """
    d = decay(snapshot, now_s, settings)
    s, f = snapshot.successes * d, max(snapshot.failures - snapshot.run_weight, 0.0) * d
    p = (f + PRIOR_FAILURES) / (s + f + PRIOR_SUCCESSES)
    floor = settings.sole_consecutive_failures if sole else settings.consecutive_failures
    floor = max(floor, 1)
    if p >= 1.0 or not 0.0 < settings.run_chance < 1.0:
        return floor
    return max(floor, math.ceil(math.log(settings.run_chance) / math.log(p) - 1e-9))


def trip_rule(snapshot: BreakerSnapshot, now_s: float, settings: BreakerSettings, *, sole: bool) -> TripRule | None:
    """Which rule opens a CLOSED breaker whose snapshot is `snapshot` (its
    current run included), or None.

    The rate rule's failure share is `1 - score` (the same prior), so a few
    unlucky first calls never make a high share on their own.
    """
    if snapshot.run >= run_needed(snapshot, now_s, settings, sole=sole):
        return TripRule.RUN
    threshold = settings.sole_failure_rate if sole else settings.failure_rate
    s, f = counts(snapshot, now_s, settings)
    if threshold <= 1.0 and s + f >= max(settings.min_results, 1e-9) and f / (PRIOR_SUCCESSES + s + f) >= threshold:
        return TripRule.RATE
    return None


def _valued(snapshot: BreakerSnapshot, now_s: float, settings: BreakerSettings) -> BreakerSnapshot:
    """The snapshot with its decayed counts revalued at `now_s` (never backwards)."""
    if now_s <= snapshot.counted_at_s:
        return snapshot
    d = decay(snapshot, now_s, settings)
    return msgspec.structs.replace(
        snapshot,
        successes=snapshot.successes * d,
        failures=snapshot.failures * d,
        run_weight=snapshot.run_weight * d,
        counted_at_s=now_s,
    )


def _trip(snapshot: BreakerSnapshot, now_s: float, settings: BreakerSettings, rule: TripRule) -> BreakerSnapshot:
    trips = snapshot.trips + 1
    return msgspec.structs.replace(
        snapshot,
        open=True,
        trips=trips,
        opened_at_s=now_s,
        cooldown_s=cooldown_for(trips, settings),
        closed_at_s=0.0,
        trip_rule=str(rule),
    )


def record(
    snapshot: BreakerSnapshot,
    counted: Counted,
    *,
    probe: bool,
    now_s: float,
    settings: BreakerSettings,
    sole: bool = False,
    error: str = "",
) -> BreakerSnapshot:
    """The snapshot after one attempt's result (SPEC §5 transitions).

    Args:
        snapshot: the stored snapshot the result applies to.
        counted: how the result counts.
        probe: the attempt held the HALF_OPEN probe permit.
        now_s: store-clock time of the result.
        settings: thresholds.
        sole: the target is the only offer of a catalog model (the stricter
            `sole_*` thresholds apply).
        error: short description of a failure (kept as `last_error`).

    Returns:
        The new snapshot (equal to `snapshot` when nothing changes):
        - NEUTRAL changes nothing.
        - Every counted result enters the decayed counts (a success ends
          the run).
        - CLOSED: a failure that makes a trip rule hold opens the breaker.
        - OPEN / HALF_OPEN: the probe's success closes the breaker, clears
          the counts of the outage and starts slow start; the probe's failure
          reopens it with a longer cooldown. Results of attempts admitted
          before the trip only enter the counts.
    """
    if counted is Counted.NEUTRAL:
        return snapshot
    snap = _valued(snapshot, now_s, settings)
    if counted is Counted.SUCCESS:
        if snap.open and probe:
            return BreakerSnapshot(
                closed_at_s=now_s,
                successes=1.0,
                counted_at_s=now_s,
                not_before_s=snap.not_before_s,
                last_error=snap.last_error,
                trip_rule=snap.trip_rule,
            )
        return msgspec.structs.replace(snap, successes=snap.successes + 1.0, run=0, run_weight=0.0)
    failed = msgspec.structs.replace(
        snap,
        failures=snap.failures + 1.0,
        run=snap.run + 1,
        run_weight=snap.run_weight + 1.0,
        last_error=error or snap.last_error,
    )
    if snap.open:
        return _trip(failed, now_s, settings, TripRule.PROBE) if probe else failed
    rule = trip_rule(failed, now_s, settings, sole=sole)
    return _trip(failed, now_s, settings, rule) if rule is not None else failed
