"""The gates' one decision for a dispatch (`turnout.core.admission`): order, meaning, and what the loop does."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnout.core.admission import (
    BREAKER_REASONS,
    Admission,
    BreakerAnswer,
    Gates,
    Unsupported,
    admission,
    on_refused,
)
from turnout.core.loop import Dispatch, GiveUp, LoopState, SkipReason, StopReason, begin, next_step
from turnout.core.plan import Plan, PlanEntry, Role
from turnout.core.policy import Policy
from turnout.core.types import Target

A = Target(provider="pa", model="m-a", catalog_model="m")
B = Target(provider="pb", model="m-b", catalog_model="m")
C = Target(provider="pc", model="m-c", catalog_model="m")
PLAN = Plan(
    requested_model="m",
    entries=(PlanEntry(target=A, role=Role.PRIMARY), PlanEntry(target=B, role=Role.PROVIDER_FALLBACK)),
    plan_cap=(PlanEntry(target=C, role=Role.PLAN_FALLBACK),),
)
OPEN_BREAKER = BreakerAnswer(refused=SkipReason.CIRCUIT_OPEN, reopen_in_s=12.0)


def _first() -> tuple[LoopState, Dispatch]:
    state = begin(PLAN, Policy(), deadline_s=100.0)
    step = next_step(state, 0.0)
    assert isinstance(step, Dispatch)
    return state, step


@pytest.mark.parametrize(
    ("gates", "expected"),
    [
        (Gates(resolved=False, credential_open=True), Admission(refused=SkipReason.NO_CREDENTIAL)),
        (
            Gates(unsupported=Unsupported("`n` > 1", "n"), credential_open=True),
            Admission(refused=SkipReason.UNSUPPORTED, detail="`n` > 1", param="n"),
        ),
        (
            Gates(credential_open=True, may_fall_back=True, capped_s=5.0),
            Admission(refused=SkipReason.CREDENTIAL_OPEN, may_fall_back=True),
        ),
        (Gates(capped_s=5.0, breaker=OPEN_BREAKER), Admission(refused=SkipReason.PLAN_CAPPED, reopen_in_s=5.0)),
        (Gates(), Admission(ask_breaker=True)),
        (Gates(breaker=OPEN_BREAKER), Admission(refused=SkipReason.CIRCUIT_OPEN, reopen_in_s=12.0)),
        (
            Gates(breaker=BreakerAnswer(refused=SkipReason.RAMPING, reopen_in_s=1.0)),
            Admission(refused=SkipReason.RAMPING, reopen_in_s=1.0),
        ),
        (
            Gates(breaker=BreakerAnswer(refused=SkipReason.RESTING, reopen_in_s=30.0)),
            Admission(refused=SkipReason.RESTING, reopen_in_s=30.0),
        ),
        (Gates(breaker=BreakerAnswer()), Admission()),
    ],
    ids=[
        "no-credential-first",
        "unsupported-before-credential",
        "credential-before-cap",
        "cap-before-breaker",
        "breaker-asked-last",
        "breaker-open",
        "slow-start",
        "not-before",
        "all-open",
    ],
)
def test_the_first_closed_gate_decides(gates: Gates, expected: Admission) -> None:
    state, _ = _first()
    assert admission(state, gates) == expected


def test_a_usage_cap_does_not_close_a_special_list() -> None:
    state, _ = _first()
    special = LoopState(plan=PLAN, policy=Policy(), deadline_s=100.0, sequence=PLAN.plan_cap, special=True)
    assert admission(state, Gates(capped_s=5.0)).refused is SkipReason.PLAN_CAPPED
    assert admission(special, Gates(capped_s=5.0)) == Admission(ask_breaker=True)


def test_only_an_admission_with_every_gate_open_goes() -> None:
    assert Admission().go
    assert not Admission(ask_breaker=True).go
    assert not Admission(refused=SkipReason.RESTING).go


@pytest.mark.parametrize(
    ("refusal", "cursor", "skipped", "byok_fallback"),
    [
        (Admission(refused=SkipReason.NO_CREDENTIAL), 1, (SkipReason.NO_CREDENTIAL,), False),
        (Admission(refused=SkipReason.UNSUPPORTED, detail="d", param="n"), 1, (SkipReason.UNSUPPORTED,), False),
        (Admission(refused=SkipReason.CREDENTIAL_OPEN, may_fall_back=True), 0, (), True),
        (Admission(refused=SkipReason.CREDENTIAL_OPEN), 1, (SkipReason.CREDENTIAL_OPEN,), False),
        (Admission(refused=SkipReason.CIRCUIT_OPEN, reopen_in_s=3.0), 1, (SkipReason.CIRCUIT_OPEN,), False),
    ],
    ids=["no-credential", "unsupported", "shared-key-next", "credential-skip", "breaker-skip"],
)
def test_a_refusal_changes_the_loop_as_its_gate_says(
    refusal: Admission, cursor: int, skipped: tuple[SkipReason, ...], byok_fallback: bool
) -> None:
    state, step = _first()
    after = on_refused(state, step, refusal, now_s=1.0)
    assert (after.cursor, tuple(s.reason for s in after.skips), after.byok_fallback) == (cursor, skipped, byok_fallback)
    assert after.records == ()  # never an attempt


def test_a_usage_cap_moves_to_the_plan_fallbacks() -> None:
    state, step = _first()
    after = on_refused(state, step, Admission(refused=SkipReason.PLAN_CAPPED, reopen_in_s=9.0), now_s=1.0)
    assert after.special and after.sequence == PLAN.plan_cap
    assert [(s.target, s.reason, s.reopen_in_s) for s in after.skips] == [(A, SkipReason.PLAN_CAPPED, 9.0)]


def test_the_unsupported_skip_keeps_what_the_api_cannot_express() -> None:
    state, step = _first()
    after = on_refused(state, step, Admission(refused=SkipReason.UNSUPPORTED, detail="d", param="n"), now_s=1.0)
    assert (after.skips[0].detail, after.skips[0].param) == ("d", "n")


def test_on_refused_needs_a_refusal() -> None:
    state, step = _first()
    with pytest.raises(ValueError, match="needs a refusal"):
        on_refused(state, step, Admission(), now_s=1.0)


def test_every_target_refused_by_its_breaker_ends_all_open() -> None:
    state, step = _first()
    state = on_refused(state, step, Admission(refused=SkipReason.CIRCUIT_OPEN, reopen_in_s=3.0), now_s=1.0)
    second = next_step(state, 1.0)
    assert isinstance(second, Dispatch)
    state = on_refused(state, second, Admission(refused=SkipReason.RESTING, reopen_in_s=8.0), now_s=1.0)
    assert next_step(state, 1.0) == GiveUp(reason=StopReason.ALL_OPEN)


_breakers = st.one_of(
    st.none(),
    st.builds(
        BreakerAnswer,
        refused=st.one_of(st.none(), st.sampled_from(sorted(BREAKER_REASONS))),
        reopen_in_s=st.one_of(st.none(), st.floats(0, 1e4)),
    ),
)
_gates = st.builds(
    Gates,
    resolved=st.booleans(),
    unsupported=st.one_of(st.none(), st.builds(Unsupported, st.text(max_size=5), st.none())),
    credential_open=st.booleans(),
    may_fall_back=st.booleans(),
    capped_s=st.one_of(st.none(), st.floats(0.001, 1e4)),
    breaker=_breakers,
)


def _closed(gates: Gates) -> bool:
    """Some gate is known closed."""
    breaker_closed = gates.breaker is not None and gates.breaker.refused is not None
    return (
        not gates.resolved
        or gates.unsupported is not None
        or gates.credential_open
        or gates.capped_s is not None
        or breaker_closed
    )


@given(gates=_gates, special=st.booleans())
def test_a_closed_gate_never_dispatches_and_a_refusal_never_attempts(gates: Gates, special: bool) -> None:
    state, step = _first()
    if special:
        state = LoopState(plan=PLAN, policy=Policy(), deadline_s=100.0, sequence=PLAN.entries, special=True)
    decided = admission(state, gates)
    capped_only_on_special = special and gates.capped_s is not None
    if _closed(gates) and not capped_only_on_special:
        assert not decided.go
    if decided.go:
        assert gates.breaker is not None and gates.breaker.refused is None  # the breaker was asked, and admitted
    if decided.ask_breaker:
        assert gates.breaker is None and decided.refused is None  # asked only once the others are open
    if decided.refused is not None:
        after = on_refused(state, step, decided, now_s=1.0)
        assert after.records == state.records  # a refused dispatch is never an attempt
        assert len(after.skips) <= len(state.skips) + 1
