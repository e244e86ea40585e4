"""`turnout.core.recording`: what one result writes, and how a change applies (SPEC §5)."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnout.core.breaker import CLOSED, BreakerSettings, BreakerSnapshot, Counted, record, rest
from turnout.core.counting import count
from turnout.core.credentials import Credential
from turnout.core.recording import ERROR_MAX, Change, ResultWrites, apply, decide
from turnout.core.types import FailureKind

SETTINGS = BreakerSettings()
NOW = 1_000.0


def _decide(
    kind: FailureKind,
    *,
    credential: Credential = Credential.SHARED,
    owned: bool = False,
    retry_after_s: float | None = None,
    probe: bool = False,
    first_measure: bool = False,
) -> ResultWrites:
    return decide(
        kind,
        credential=credential,
        credential_subject=owned,
        retry_after_s=retry_after_s,
        probe=probe,
        sole=False,
        error="e",
        first_measure=first_measure,
    )


CASES = [
    # (kind, credential, owned, retry_after_s, probe, first measure) -> (target counted, rest, credential counted, quiet, alarm)
    (FailureKind.SUCCESS, Credential.SHARED, False, None, False, False, (Counted.SUCCESS, None, None, True, False)),
    (FailureKind.SUCCESS, Credential.SHARED, False, None, True, False, (Counted.SUCCESS, None, None, False, False)),
    (FailureKind.SUCCESS, Credential.SHARED, False, None, False, True, (Counted.SUCCESS, None, None, False, False)),
    (
        FailureKind.SUCCESS,
        Credential.OWN,
        True,
        None,
        False,
        False,
        (Counted.SUCCESS, None, Counted.SUCCESS, True, False),
    ),
    (FailureKind.SUCCESS, Credential.OWN, False, None, False, False, (Counted.SUCCESS, None, None, True, False)),
    (
        FailureKind.SERVER_ERROR,
        Credential.SHARED,
        False,
        None,
        False,
        False,
        (Counted.FAILURE, None, None, False, False),
    ),
    (FailureKind.SERVER_ERROR, Credential.SHARED, False, 3.0, False, False, (Counted.NEUTRAL, 3.0, None, False, False)),
    (FailureKind.RATE_LIMITED, Credential.OWN, True, 3.0, False, False, ("-", None, Counted.FAILURE, False, False)),
    (FailureKind.AUTH, Credential.SHARED, False, None, False, False, ("-", None, None, False, True)),
    (FailureKind.AUTH, Credential.ENDPOINT, True, None, False, False, ("-", None, Counted.FAILURE, False, False)),
    (FailureKind.CANCELLED, Credential.SHARED, False, None, True, False, ("-", None, None, False, False)),
]


@pytest.mark.parametrize(("kind", "credential", "owned", "retry_after_s", "probe", "first", "expected"), CASES)
def test_decide_table(
    kind: FailureKind,
    credential: Credential,
    owned: bool,
    retry_after_s: float | None,
    probe: bool,
    first: bool,
    expected: tuple[object, float | None, Counted | None, bool, bool],
) -> None:
    writes = _decide(
        kind, credential=credential, owned=owned, retry_after_s=retry_after_s, probe=probe, first_measure=first
    )
    target, rest_s, owned_counted, quiet, alarm = expected
    if target == "-":
        assert writes.target is None
    else:
        assert writes.target == Change(counted=target, rest_s=rest_s, probe=probe, error="e")  # type: ignore[arg-type]
    assert (writes.credential.counted if writes.credential else None) is owned_counted
    assert (writes.quiet, writes.alarm) == (quiet, alarm)


KINDS = st.sampled_from(list(FailureKind))
CREDENTIALS = st.sampled_from(list(Credential))
HINTS = st.one_of(st.none(), st.floats(min_value=-5.0, max_value=1e5, allow_nan=False))


@given(KINDS, CREDENTIALS, st.booleans(), HINTS, st.booleans(), st.booleans(), st.booleans(), st.text(max_size=400))
def test_decide_invariants(
    kind: FailureKind,
    credential: Credential,
    owned: bool,
    retry_after_s: float | None,
    probe: bool,
    sole: bool,
    first_measure: bool,
    error: str,
) -> None:
    writes = decide(
        kind,
        credential=credential,
        credential_subject=owned,
        retry_after_s=retry_after_s,
        probe=probe,
        sole=sole,
        error=error,
        first_measure=first_measure,
    )
    counting = count(kind, credential=credential, retry_after_s=retry_after_s)
    # The target is written exactly when its count or its rest asks for it, as counting says.
    assert (writes.target is not None) == (counting.target is not Counted.NEUTRAL or counting.rest_s is not None)
    if writes.target is not None:
        assert (writes.target.counted, writes.target.rest_s) == (counting.target, counting.rest_s)
        assert (writes.target.probe, writes.target.sole) == (probe, sole)
    # A credential's health is written only for a credential that has one, and never as a permit holder.
    if writes.credential is not None:
        assert owned and writes.credential.counted is counting.credential is not Counted.NEUTRAL
        assert writes.credential.probe is None and writes.credential.rest_s is None and not writes.credential.sole
    # Quiet is a plain success only: no probe, no rest, no first measure.
    if writes.quiet:
        assert writes.target is not None and writes.target.counted is Counted.SUCCESS
        assert not probe and writes.target.rest_s is None and not first_measure
    assert writes.alarm == counting.alarm
    for change in (writes.target, writes.credential):
        if change is not None:
            assert change.error == error[:ERROR_MAX]


SNAPSHOTS = st.builds(
    BreakerSnapshot,
    open=st.booleans(),
    trips=st.integers(min_value=0, max_value=5),
    opened_at_s=st.floats(min_value=NOW - 100, max_value=NOW),
    cooldown_s=st.floats(min_value=1.0, max_value=60.0),
    failures=st.floats(min_value=0.0, max_value=50.0),
    successes=st.floats(min_value=0.0, max_value=50.0),
    counted_at_s=st.just(NOW - 1.0),
)


@given(SNAPSHOTS, st.sampled_from(list(Counted)), st.booleans(), st.floats(min_value=0.1, max_value=1e4))
def test_apply_is_record_then_rest(snap: BreakerSnapshot, counted: Counted, probe: bool, rest_s: float) -> None:
    """Without a rest, a change is `record`; with one, `rest` follows, and a probe told to wait
    keeps the breaker OPEN from now for at least that long."""
    plain = apply(Change(counted=counted, probe=probe), snap, NOW, SETTINGS)
    assert plain == record(snap, counted, probe=probe, now_s=NOW, settings=SETTINGS)
    rested = apply(Change(counted=counted, rest_s=rest_s, probe=probe), snap, NOW, SETTINGS)
    expected = rest(plain, rest_s, NOW, SETTINGS)
    if probe and expected.open:
        assert rested.opened_at_s == NOW and rested.cooldown_s >= rest_s
        assert msgspec.structs.replace(rested, opened_at_s=expected.opened_at_s, cooldown_s=expected.cooldown_s) == (
            expected
        )
    else:
        assert rested == expected


def test_apply_credential_change_is_the_probe_only_when_half_open() -> None:
    """A credential's health has no permit: its first attempt after the cooldown is its probe."""
    tripped = BreakerSnapshot(open=True, trips=1, opened_at_s=NOW - 10.0, cooldown_s=5.0)
    healed = apply(Change(counted=Counted.SUCCESS, probe=None), tripped, NOW, SETTINGS)
    assert not healed.open and healed.closed_at_s == NOW
    still = apply(Change(counted=Counted.SUCCESS, probe=None), tripped, NOW - 6.0, SETTINGS)
    assert still.open
    assert apply(Change(counted=Counted.NEUTRAL, probe=None), CLOSED, NOW, SETTINGS) == CLOSED
