"""Expected queue wait and shedding at the door (issue #14 item 5).

Owns: the count of jobs a new job has ahead of it under the fair-share
pickup (SPEC §10: round robin across orgs, oldest first within an org), the
fleet's capacity from the workers' heartbeats, the expected wait
(`ahead × service time / fleet slots`), the largest backlog a budget allows,
and the `Retry-After` of a shed request. A job is shed when its expected wait plus
one service time exceeds 90 % of its budget (`HEADROOM`). The enqueue script applies the
same `jobs_ahead` rule in Lua (`turnout.state.queue`) so the count and the
decision take the one round trip the enqueue already makes.
Must not import: anything outside the standard library and msgspec.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import msgspec


class WorkerBeat(msgspec.Struct, frozen=True):
    """One worker's heartbeat: what it can run and how long a job takes it.

    Attributes:
        slots: its `worker_max_jobs`.
        service_ms: mean time a job held a slot over its recent jobs (ms); 0 = none yet.
        expires_ms: Redis time (epoch ms) after which the beat is stale (the worker is gone).
    """

    slots: int
    service_ms: float
    expires_ms: int


class FleetCapacity(msgspec.Struct, frozen=True):
    """The live fleet as the door sees it.

    Attributes:
        slots: jobs the live workers run at once (sum of their slots), > 0.
        service_ms: mean time a job holds a slot (ms), > 0, weighted by slots.
    """

    slots: int
    service_ms: float


def fleet_capacity(beats: Iterable[WorkerBeat], now_ms: int) -> FleetCapacity | None:
    """The fleet's capacity from its workers' heartbeats at Redis time `now_ms`.

    Stale beats (expired) are ignored. The service time is the slot-weighted
    mean over the live workers that have served a job.

    Returns:
        None when no live worker has a service time yet (nothing to estimate
        from: the door then sheds on depth only).
    """
    live = [b for b in beats if b.expires_ms > now_ms and b.slots > 0]
    timed = [b for b in live if b.service_ms > 0]
    if not timed:
        return None
    weight = sum(b.slots for b in timed)
    return FleetCapacity(
        slots=sum(b.slots for b in live), service_ms=sum(b.service_ms * b.slots for b in timed) / weight
    )


def jobs_ahead(own_waiting: int, others_waiting: Iterable[int]) -> int:
    """Jobs picked before a new job of an org that has `own_waiting` jobs waiting.

    Under the fair pickup the new job is its org's `own_waiting + 1`-th, taken
    in that ring round; every other org with waiting jobs gives at most one
    job per round, so at most `own_waiting + 1` before it (an upper bound:
    orgs behind it on the ring give one fewer).

    Args:
        own_waiting: jobs of the new job's org waiting (not yet claimed).
        others_waiting: the waiting jobs of each other org on the ring.

    Returns:
        `own_waiting + Σ min(other, own_waiting + 1)`; 0 for an empty queue.
    """
    return own_waiting + sum(min(other, own_waiting + 1) for other in others_waiting)


def expected_wait_ms(ahead: int, capacity: FleetCapacity) -> float:
    """Expected wait (ms) of a job with `ahead` jobs before it: `ahead × service_ms / slots`."""
    return max(ahead, 0) * capacity.service_ms / capacity.slots


HEADROOM = 0.1
"""Share of a job's budget the door keeps free of expected wait and service (estimates are noisy)."""


def usable_budget_ms(budget_ms: int) -> float:
    """The part of `budget_ms` a job's expected wait plus service may fill: all but `HEADROOM`."""
    return max(budget_ms, 0) * (1 - HEADROOM)


def sheds(ahead: int, budget_ms: int, capacity: FleetCapacity | None) -> bool:
    """True when the job cannot be served in time: expected wait plus one service time over its usable budget.

    Under overload the backlog settles where admitted jobs just fit, so the
    door needs the service time (a job admitted on its wait alone is picked
    as its budget ends; measured at 3× capacity: 561 of 714 admitted jobs
    ended 504) and headroom (without it, 178 of 514). Never sheds with
    nothing ahead, nor without a capacity estimate.
    """
    if capacity is None or ahead <= 0:
        return False
    return expected_wait_ms(ahead, capacity) + capacity.service_ms > usable_budget_ms(budget_ms)


def max_jobs_ahead(budget_ms: int, capacity: FleetCapacity | None) -> int:
    """The largest `ahead` that `sheds` admits for `budget_ms` (-1: no limit, no estimate).

    `sheds(a, budget_ms, capacity)` is exactly `a > max_jobs_ahead(...)` for
    every `a >= 0` (the enqueue script compares with this number).
    """
    if capacity is None:
        return -1
    limit = max(
        0, math.floor((usable_budget_ms(budget_ms) - capacity.service_ms) * capacity.slots / capacity.service_ms)
    )
    while sheds(limit + 1, budget_ms, capacity) is False:  # floating-point edges: match `sheds` exactly
        limit += 1
    while limit > 0 and sheds(limit, budget_ms, capacity):
        limit -= 1
    return limit


def shed_retry_after_s(ahead: int, budget_ms: int, capacity: FleetCapacity) -> int:
    """`Retry-After` (whole seconds, >= 1) for a shed job: when the backlog beyond its budget should have drained."""
    excess_ms = expected_wait_ms(ahead, capacity) + capacity.service_ms - usable_budget_ms(budget_ms)
    return max(1, math.ceil(excess_ms / 1000))


class RecentServiceTimes:
    """The last `window` service times of one worker (ms), for its heartbeat.

    Args:
        window: how many recent jobs the mean covers.
    """

    def __init__(self, window: int = 100) -> None:
        self._window = window
        self._times: list[float] = []

    def add(self, service_ms: float) -> None:
        """Record one job's time in a slot (ms, >= 0)."""
        self._times.append(max(service_ms, 0.0))
        if len(self._times) > self._window:
            del self._times[0]

    def mean_ms(self) -> float:
        """Mean of the recorded times (ms); 0 when none yet."""
        return sum(self._times) / len(self._times) if self._times else 0.0
