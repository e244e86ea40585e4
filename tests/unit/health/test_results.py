"""Recording results (`turnout.health.results`): what counts where, trips, "not before" (SPEC §5)."""

from __future__ import annotations

import logging

import pytest

from support.breakers import (
    CRED,
    FRESH_RUN,
    NEUTRAL_KINDS,
    SETTINGS,
    SOLE_RUN,
    FakeTime,
    Fleet,
    ManualSleep,
    T,
    U,
)
from turnout.core.breaker import (
    CLOSED,
    NOT_BEFORE_SLACK_S,
    BreakerState,
    counts,
    state_at,
)
from turnout.core.counting import count
from turnout.core.credentials import Credential
from turnout.core.loop import SkipReason
from turnout.core.types import FailureKind
from turnout.health import (
    Gate,
    credential_subject,
)
from turnout.state.breaker_store import Versioned

# ------------------------------------------------------------------ what counts where


@pytest.mark.parametrize("kind", list(FailureKind), ids=lambda k: k.value)
async def test_breakers_record_counts_each_failure_kind_of_the_platform_key_as_counting_says(
    fleet: Fleet, kind: FailureKind
) -> None:
    expected = count(kind, credential=Credential.SHARED, retry_after_s=None)
    await fleet.result(kind, error="x")
    entry = (await fleet.store.load([T])).entries[T]
    s, f = counts(entry.snapshot, fleet.time.epoch, SETTINGS)
    assert (s, f) == {"success": (1.0, 0.0), "failure": (0.0, 1.0), "neutral": (0.0, 0.0)}[expected.target]
    if expected.target == "neutral":
        assert entry == Versioned(0, CLOSED), "a result that counts nowhere writes nothing"
    assert fleet.alarms == ([T] if expected.alarm else [])


@pytest.mark.parametrize("kind", NEUTRAL_KINDS, ids=lambda k: k.value)
async def test_breakers_neutral_kinds_never_count(fleet: Fleet, kind: FailureKind) -> None:
    await fleet.fail(10, kind=kind)
    assert (await fleet.store.load([T])).entries[T] == Versioned(0, CLOSED)
    assert await fleet.admit() == Gate(admitted=True)
    # ...nor break a run of counted failures.
    await fleet.fail(FRESH_RUN - 1)
    await fleet.fail(5, kind=kind)
    assert (await fleet.admit()).admitted
    await fleet.fail(1)
    assert not (await fleet.admit()).admitted


@pytest.mark.parametrize("kind", [FailureKind.AUTH, FailureKind.QUOTA_EXHAUSTED], ids=lambda k: k.value)
async def test_breakers_platform_key_rejected_is_an_alarm_not_a_failure(
    fleet: Fleet, kind: FailureKind, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="turnout.breaker"):
        await fleet.fail(FRESH_RUN * 2, kind=kind)
    assert fleet.alarms == [T] * (FRESH_RUN * 2)
    assert "operator action needed" in caplog.text
    assert (await fleet.store.load([T])).entries[T] == Versioned(0, CLOSED)
    assert await fleet.admit() == Gate(admitted=True)


@pytest.mark.parametrize("credential", [Credential.OWN, Credential.ENDPOINT], ids=lambda c: c.value)
@pytest.mark.parametrize("kind", [FailureKind.AUTH, FailureKind.QUOTA_EXHAUSTED], ids=lambda k: k.value)
async def test_breakers_tenant_key_failures_count_against_the_credential_only(
    fleet: Fleet, kind: FailureKind, credential: Credential
) -> None:
    for _ in range(FRESH_RUN):
        await fleet.result(kind, error="HTTP 401", credential=credential, credential_key=CRED)
    assert (await fleet.store.load([T])).entries[T] == Versioned(0, CLOSED), "the shared target is untouched"
    assert fleet.alarms == [], "a tenant's key is not the operator's alarm"
    cred = await fleet.snapshot(CRED)
    successes, failures = counts(cred, fleet.time.epoch, SETTINGS)
    assert successes == 0.0 and failures == pytest.approx(FRESH_RUN)
    assert cred.open and cred.last_error == "HTTP 401"

    view = await fleet.view(T, CRED)
    assert not await fleet.breakers.credentials.admits(CRED, view)
    assert await fleet.breakers.gate.admit(T, view) == Gate(admitted=True), "other tenants still use the target"
    assert await fleet.breakers.credentials.admits(credential_subject("org-2", "acme"), view)


async def test_breakers_own_account_rate_limit_never_rests_the_shared_target(fleet: Fleet) -> None:
    await fleet.result(FailureKind.RATE_LIMITED, retry_after_s=30.0, credential=Credential.OWN, credential_key=CRED)
    assert (await fleet.store.load([T])).entries[T] == Versioned(0, CLOSED)
    assert counts(await fleet.snapshot(CRED), fleet.time.epoch, SETTINGS) == (0.0, 1.0)
    assert await fleet.admit() == Gate(admitted=True)


async def test_breakers_tenant_key_success_counts_for_target_and_credential(fleet: Fleet) -> None:
    await fleet.result(FailureKind.SUCCESS, credential=Credential.OWN, credential_key=CRED)
    assert counts(await fleet.snapshot(T), fleet.time.epoch, SETTINGS) == (1.0, 0.0)
    assert counts(await fleet.snapshot(CRED), fleet.time.epoch, SETTINGS) == (1.0, 0.0)


async def test_breakers_tenant_key_without_a_credential_subject_counts_nowhere(fleet: Fleet) -> None:
    await fleet.result(FailureKind.AUTH, credential=Credential.OWN, credential_key=None)
    loaded = await fleet.store.load([T, CRED])
    assert loaded.entries == {T: Versioned(0, CLOSED), CRED: Versioned(0, CLOSED)}


async def test_breakers_credential_health_heals_through_half_open(fleet: Fleet) -> None:
    for _ in range(FRESH_RUN):
        await fleet.result(FailureKind.AUTH, credential=Credential.OWN, credential_key=CRED)
    assert not await fleet.breakers.credentials.admits(CRED, await fleet.view(T, CRED))
    fleet.time.advance(SETTINGS.cooldown_s)
    assert await fleet.breakers.credentials.admits(CRED, await fleet.view(T, CRED)), "HALF_OPEN: the next use probes"
    await fleet.result(FailureKind.SUCCESS, credential=Credential.OWN, credential_key=CRED)
    cred = await fleet.snapshot(CRED)
    assert not cred.open and cred.closed_at_s == fleet.time.epoch
    assert (CRED, BreakerState.HALF_OPEN, BreakerState.CLOSED) in fleet.transitions


# ------------------------------------------------------------------ trips


async def test_breakers_admit_while_a_run_is_too_short_to_open(fleet: Fleet) -> None:
    assert FRESH_RUN >= SETTINGS.consecutive_failures
    assert await fleet.admit() == Gate(admitted=True)
    await fleet.fail(FRESH_RUN - 1)
    assert await fleet.admit() == Gate(admitted=True)
    assert fleet.transitions == [] and fleet.trips == []


async def test_breakers_run_of_failures_rejects_for_the_cooldown(fleet: Fleet) -> None:
    await fleet.fail(FRESH_RUN)
    gate = await fleet.admit()
    assert gate == Gate(admitted=False, reopen_in_s=SETTINGS.cooldown_s, reason=SkipReason.CIRCUIT_OPEN)
    fleet.time.advance(3.0)
    gate = await fleet.admit()
    assert not gate.admitted
    assert gate.reopen_in_s == pytest.approx(SETTINGS.cooldown_s - 3.0)
    assert fleet.transitions == [(T, BreakerState.CLOSED, BreakerState.OPEN)]
    assert fleet.trips == [(T, "run", False)]
    snap = await fleet.snapshot()
    assert (snap.last_error, snap.trip_rule, snap.trips) == (f"HTTP 503 #{FRESH_RUN - 1}", "run", 1)


async def test_breakers_healthy_target_that_goes_hard_down_opens_within_three_calls(fleet: Fleet) -> None:
    await fleet.succeed(20)
    await fleet.fail(SETTINGS.consecutive_failures - 1)
    assert (await fleet.admit()).admitted
    await fleet.fail(1)
    assert not (await fleet.admit()).admitted
    assert fleet.trips == [(T, "run", False)]


async def test_breakers_rate_rule_opens_on_frequent_failures_without_a_long_run(fleet: Fleet) -> None:
    for calls in range(1, 61):  # success, failure, failure, ...: runs of 2 only
        await fleet.result(FailureKind.SUCCESS if calls % 3 == 1 else FailureKind.SERVER_ERROR)
        if (await fleet.snapshot()).open:
            break
    snap = await fleet.snapshot()
    assert snap.open and snap.trip_rule == "rate"
    assert fleet.trips == [(T, "rate", False)]


async def test_breakers_sole_target_opens_only_later(time: FakeTime, sleeper: ManualSleep) -> None:
    """A model's only target opens only at a high failure rate (SPEC §5): a
    hard-down one takes more failures than another target, at most its run."""
    fleet = Fleet(time, sleeper, sole_targets=frozenset({T}))
    assert SOLE_RUN > FRESH_RUN
    failures = 0
    while not (await fleet.snapshot()).open and failures < SOLE_RUN:
        await fleet.fail(1)
        failures += 1
    assert FRESH_RUN < failures <= SOLE_RUN
    assert not (await fleet.admit()).admitted
    assert [(t, sole) for t, _, sole in fleet.trips] == [(T, True)]
    await fleet.fail(FRESH_RUN, target=U)
    assert not (await fleet.admit(U)).admitted, "other targets keep the usual thresholds"
    assert fleet.trips[-1] == (U, "run", False)


async def test_breakers_recording_view_sees_its_own_trip(fleet: Fleet) -> None:
    view = await fleet.view()
    for _ in range(FRESH_RUN):
        await fleet.breakers.results.record(T, FailureKind.TIMEOUT, probe_token=None, error="timeout", view=view)
    assert view.entries[T].version == FRESH_RUN
    assert not (await fleet.breakers.gate.admit(T, view)).admitted


async def test_breakers_targets_are_independent(fleet: Fleet) -> None:
    await fleet.trip()
    view = await fleet.view(T, U)
    assert not (await fleet.breakers.gate.admit(T, view)).admitted
    assert (await fleet.breakers.gate.admit(U, view)).admitted


async def test_breakers_non_probe_results_while_open_only_count(fleet: Fleet) -> None:
    before_trip = await fleet.view()  # an attempt admitted before the trip
    await fleet.trip()
    opened = await fleet.snapshot()
    await fleet.breakers.results.record(T, FailureKind.SUCCESS, probe_token=None, error="", view=before_trip)
    await fleet.breakers.results.record(T, FailureKind.SERVER_ERROR, probe_token=None, error="late", view=before_trip)
    snap = await fleet.snapshot()
    assert (snap.open, snap.trips, snap.opened_at_s, snap.cooldown_s) == (
        True,
        1,
        opened.opened_at_s,
        opened.cooldown_s,
    )
    successes, failures = counts(snap, fleet.time.epoch, SETTINGS)
    assert successes == 1.0 and failures == pytest.approx(FRESH_RUN + 1)
    assert fleet.transitions == [(T, BreakerState.CLOSED, BreakerState.OPEN)]


# ------------------------------------------------------------------ not before (Retry-After)


@pytest.mark.parametrize("kind", [FailureKind.RATE_LIMITED, FailureKind.SERVER_ERROR], ids=lambda k: k.value)
async def test_breakers_retry_after_rests_the_target_fleet_wide_without_counting(
    fleet: Fleet, kind: FailureKind
) -> None:
    for _ in range(FRESH_RUN * 2):  # far more than a run that opens
        await fleet.result(kind, error="HTTP 429", retry_after_s=30.0)
    snap = await fleet.snapshot()
    assert snap.not_before_s == fleet.time.epoch + 30.0
    assert not snap.open and snap.trips == 0
    assert counts(snap, fleet.time.epoch, SETTINGS) == (0.0, 0.0), "a Retry-After is not a failure"

    other = fleet.process()  # another worker
    gate = await other.gate.admit(T, await other.reads.view([T]))
    assert (gate.admitted, gate.reason) == (False, SkipReason.RESTING)
    assert gate.reopen_in_s == pytest.approx(30.0 - NOT_BEFORE_SLACK_S)
    assert (await other.reads.view([T, U])).unavailable_for([T]) == pytest.approx(30.0 - NOT_BEFORE_SLACK_S)

    fleet.time.advance(29.0)
    assert (await other.gate.admit(T, await other.reads.view([T]))).reason is SkipReason.RESTING
    fleet.time.advance(1.0 - NOT_BEFORE_SLACK_S)
    assert await other.gate.admit(T, await other.reads.view([T])) == Gate(admitted=True)
    assert fleet.transitions == [] and fleet.trips == []


async def test_breakers_retry_after_is_capped_and_a_later_one_is_kept(fleet: Fleet) -> None:
    await fleet.result(FailureKind.RATE_LIMITED, retry_after_s=86_400.0)
    assert (await fleet.snapshot()).not_before_s == fleet.time.epoch + SETTINGS.max_not_before_s
    await fleet.result(FailureKind.RATE_LIMITED, retry_after_s=5.0)
    assert (await fleet.snapshot()).not_before_s == fleet.time.epoch + SETTINGS.max_not_before_s


async def test_breakers_probe_told_retry_after_waits_that_long_without_a_trip(fleet: Fleet) -> None:
    await fleet.trip_and_cool()
    view, gate = await fleet.probe()
    await fleet.breakers.results.record(
        T, FailureKind.RATE_LIMITED, probe_token=gate.probe_token, error="HTTP 429", view=view, retry_after_s=12.0
    )
    snap = await fleet.snapshot()
    now = fleet.time.epoch
    assert (snap.open, snap.trips, snap.not_before_s) == (True, 1, now + 12.0)
    assert state_at(snap, now + 11.9) is BreakerState.OPEN, "the next probe waits for the provider's time"
    assert await fleet.permit_free(), "the probe gave its permit back"
    gate = await fleet.admit()
    assert not gate.admitted and gate.reopen_in_s == pytest.approx(12.0)
    fleet.time.advance(12.0)
    assert (await fleet.admit()).probe


async def test_breakers_probe_told_retry_after_is_not_reported_as_a_trip(fleet: Fleet) -> None:
    """The trips metric counts trips by rule; a probe sent back by the provider's
    Retry-After is not one (the snapshot's `trips` does not grow either)."""
    await fleet.trip_and_cool()
    view, gate = await fleet.probe()
    await fleet.breakers.results.record(
        T, FailureKind.RATE_LIMITED, probe_token=gate.probe_token, error="HTTP 429", view=view, retry_after_s=12.0
    )
    assert (await fleet.snapshot()).trips == 1
    assert fleet.trips == [(T, "run", False)]
