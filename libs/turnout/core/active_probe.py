"""When the fleet sends an active probe to a target out of rotation (SPEC §5 half-open, issue #41 item 6).

Owns: the pure decision "should the fleet's prober probe target T now?" (`probe_due`) and
how long the prober may sleep before the next decision (`next_due_in_s`). An active probe
is a cheap call the fleet sends on its own (`turnout.adapters.probe_call`), holding the
target's probe permit like a client's probe, so recovery does not wait for client traffic.

Rules (store-clock seconds, `interval_s` the provider's `probe.interval_s`):
    - only an OPEN or HALF_OPEN target is probed (a CLOSED one gets client traffic);
    - never before a provider's "not before" (its Retry-After is obeyed, as by clients);
    - the first probe at `min(cooldown, interval_s)` after the trip, then one every
      `interval_s` after the last one (a failed probe reopens the breaker, so the trip
      time moves with it): the growing cooldown keeps client probes away, while the fleet
      keeps looking every `interval_s`, so a healed target is back within `interval_s`
      plus one request gap, however long the outage.
Must not import: anything outside the standard library, msgspec and `turnout.core`.
"""

from __future__ import annotations

from turnout.core.breaker import BreakerSnapshot, resting_for_s


def first_probe_at_s(snapshot: BreakerSnapshot, interval_s: float) -> float:
    """Store-clock time of the first active probe after the last trip of an open `snapshot`."""
    return snapshot.opened_at_s + min(max(snapshot.cooldown_s, 0.0), interval_s)


def next_due_in_s(snapshot: BreakerSnapshot, now_s: float, interval_s: float, last_probe_s: float | None) -> float:
    """Seconds from `now_s` until an active probe of the target is due (0.0: due now).

    Args:
        snapshot: the target's stored breaker snapshot.
        now_s: the store's clock (epoch seconds).
        interval_s: seconds between probes of one target (> 0).
        last_probe_s: store-clock time this prober last probed the target, or None.

    Returns:
        `math.inf` for a CLOSED target (never probed), else the wait: the later of the
        first probe time after the trip, the end of a provider's "not before", and
        `last_probe_s + interval_s`.
    """
    if not snapshot.open:
        return float("inf")
    due = max(first_probe_at_s(snapshot, interval_s), now_s + resting_for_s(snapshot, now_s))
    if last_probe_s is not None:
        due = max(due, last_probe_s + interval_s)
    return max(0.0, due - now_s)


def probe_due(snapshot: BreakerSnapshot, now_s: float, interval_s: float, last_probe_s: float | None) -> bool:
    """Whether the fleet's prober should probe the target now (module doc rules)."""
    return next_due_in_s(snapshot, now_s, interval_s, last_probe_s) == 0.0
