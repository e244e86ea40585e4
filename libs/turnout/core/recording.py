"""What one attempt's result writes to breaker health (SPEC §5 "What counts", transitions).

Owns: the pure decision, for one classified result, of the snapshot changes it
asks for (of the target, of the tenant's credential, of neither), whether the
target's change is quiet (a plain success, which may wait to share a write with
others), whether it is an operator alarm; and how one change applies to a
stored snapshot. How a result counts is `turnout.core.counting.count`; the
shell that performs the writes is `turnout.health.results`.
Must not import: anything outside the standard library, msgspec and
`turnout.core`.
"""

from __future__ import annotations

import msgspec

from turnout.core.breaker import BreakerSettings, BreakerSnapshot, BreakerState, Counted, record, rest, state_at
from turnout.core.counting import count
from turnout.core.credentials import Credential
from turnout.core.types import FailureKind

ERROR_MAX = 200
"""Characters of a failure's text kept as a snapshot's `last_error`."""


class Change(msgspec.Struct, frozen=True, kw_only=True):
    """One change of a subject's snapshot that a result asks for.

    Attributes:
        counted: how the result counts for the subject.
        rest_s: a provider's Retry-After to keep as the subject's "not before"
            (seconds), or None.
        probe: the attempt held the subject's probe permit; None: it counts as
            the probe when the subject is HALF_OPEN at the write (a tenant
            credential's health, which has no permit).
        sole: the subject is a model's only offer (the stricter trip thresholds).
        error: short, scrubbed description of a failure (at most `ERROR_MAX` characters).
    """

    counted: Counted
    rest_s: float | None = None
    probe: bool | None = False
    sole: bool = False
    error: str = ""


class ResultWrites(msgspec.Struct, frozen=True, kw_only=True):
    """What one result writes.

    Attributes:
        target: the change of the target's snapshot, or None (nothing to write).
        credential: the change of the tenant credential's snapshot, or None.
        quiet: the target's change is a plain success: it moves no standing, so
            its write may wait for others to share it.
        alarm: the platform key was rejected or is out of quota (operator action).
    """

    target: Change | None = None
    credential: Change | None = None
    quiet: bool = False
    alarm: bool = False


def decide(
    kind: FailureKind,
    *,
    credential: Credential,
    credential_subject: bool,
    retry_after_s: float | None,
    probe: bool,
    sole: bool,
    error: str,
    first_measure: bool,
) -> ResultWrites:
    """What an attempt's result writes (SPEC §5 "What counts"; rules in `turnout.core.counting`).

    Args:
        kind: the classified outcome.
        credential: the credential the attempt carried.
        credential_subject: the credential has its own health subject (a tenant-owned key).
        retry_after_s: the response's Retry-After hint, seconds, or None.
        probe: the attempt held the target's probe permit.
        sole: the target is a model's only offer.
        error: short, scrubbed description of a failure (cut to `ERROR_MAX`).
        first_measure: the attempt brings the target's first speed measure (news:
            never quiet).

    Returns:
        The `ResultWrites`. Never raises.
    """
    counting = count(kind, credential=credential, retry_after_s=retry_after_s)
    error = error[:ERROR_MAX]
    target = None
    if counting.target is not Counted.NEUTRAL or counting.rest_s is not None:
        target = Change(counted=counting.target, rest_s=counting.rest_s, probe=probe, sole=sole, error=error)
    owned = None
    if credential_subject and counting.credential is not Counted.NEUTRAL:
        owned = Change(counted=counting.credential, probe=None, error=error)
    quiet = counting.target is Counted.SUCCESS and not probe and counting.rest_s is None and not first_measure
    return ResultWrites(target=target, credential=owned, quiet=quiet, alarm=counting.alarm)


def apply(change: Change, snapshot: BreakerSnapshot, now_s: float, settings: BreakerSettings) -> BreakerSnapshot:
    """The snapshot after `change` at store-clock time `now_s` (epoch seconds; SPEC §5 transitions).

    The count goes through `turnout.core.breaker.record`; a Retry-After then sets
    "not before" (`rest`). A probe told to come back later keeps the breaker OPEN
    from now for at least that long: the next probe waits for it, and it is no new trip.
    """
    probe = change.probe if change.probe is not None else state_at(snapshot, now_s) is BreakerState.HALF_OPEN
    new = record(
        snapshot, change.counted, probe=probe, now_s=now_s, settings=settings, sole=change.sole, error=change.error
    )
    if change.rest_s is not None:
        new = rest(new, change.rest_s, now_s, settings)
        if probe and new.open:
            new = msgspec.structs.replace(new, opened_at_s=now_s, cooldown_s=max(new.cooldown_s, change.rest_s))
    return new
