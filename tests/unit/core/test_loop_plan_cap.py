"""Plan-cap continuity in the attempt loop (SPEC §10): a quota or usage-cap
failure moves to the `plan_fallbacks` list, and a target whose cap is known
not to have reset is passed over without an attempt."""

from __future__ import annotations

import pytest
from driver import drive, entry, err, ok, plan_of, quota

from turnout.core.loop import SkipReason, StopReason, begin, next_step, on_plan_capped
from turnout.core.plan import Role
from turnout.core.policy import FallbackPolicy, Policy
from turnout.core.types import FailureKind, Outcome
from turnout.core.verdict import served_facts

A = entry("openai", "gpt-5")
B = entry("azure", "gpt-5-prod", Role.PROVIDER_FALLBACK, catalog_model="gpt-5")
PC = entry("groq", "llama", Role.PLAN_FALLBACK)
KA, KB, KPC = (e.target.key for e in (A, B, PC))


def test_quota_failure_switches_to_the_plan_fallbacks_at_once() -> None:
    run = drive(plan_of(A, B, plan_cap=[PC]), Policy(), {KA: [quota()], KPC: [ok()]})
    assert run.keys == [KA, KPC]
    assert run.records[0].kind is FailureKind.QUOTA_EXHAUSTED
    assert [r.is_plan_fallback for r in run.records] == [False, True]
    assert served_facts(run.state).plan_fallback is True and served_facts(run.state).fallback is True


def test_usage_limit_wording_on_a_429_engages_the_plan_fallbacks_too() -> None:
    usage = err(429, "Usage limit reached for your plan. Your limit resets in 3s.", type_="usage_limit_reached")
    run = drive(plan_of(A, B, plan_cap=[PC]), Policy(), {KA: [usage], KPC: [ok()]})
    assert run.keys == [KA, KPC]


@pytest.mark.parametrize("outcome", [err(503), err(429)], ids=["server-error", "rate-limit"])
def test_other_failures_never_reach_the_plan_fallbacks(outcome: Outcome) -> None:
    run = drive(plan_of(A, B, plan_cap=[PC]), Policy(), {KA: [outcome, outcome], KB: [outcome]})
    assert KPC not in run.keys and run.give_up.reason is StopReason.EXHAUSTED


def test_quota_failure_without_plan_fallbacks_falls_back_in_the_plan() -> None:
    run = drive(plan_of(A, B), Policy(), {KA: [quota()], KB: [ok()]})
    assert run.keys == [KA, KB] and not any(r.is_plan_fallback for r in run.records)


def test_quota_failure_with_fallback_disabled_stops() -> None:
    run = drive(plan_of(A, B, plan_cap=[PC]), Policy(fallback=FallbackPolicy(enabled=False)), {KA: [quota()]})
    assert run.keys == [KA]


def test_a_plan_fallback_out_of_quota_does_not_switch_again() -> None:
    run = drive(plan_of(A, plan_cap=[PC]), Policy(), {KA: [quota()], KPC: [quota()]})
    assert run.keys == [KA, KPC] and run.give_up.reason is StopReason.EXHAUSTED


def test_a_capped_target_is_passed_over_without_an_attempt() -> None:
    state = begin(plan_of(A, B, plan_cap=[PC]), Policy(), deadline_s=100.0)
    step = next_step(state, 0.0)
    state = on_plan_capped(state, step, reopen_in_s=42.0, now_s=0.0)  # type: ignore[arg-type]
    assert state.records == () and [s.reason for s in state.skips] == [SkipReason.PLAN_CAPPED]
    after = next_step(state, 0.0)
    assert after.entry.target.key == KPC and after.number == 1  # type: ignore[union-attr]


def test_a_capped_target_without_plan_fallbacks_is_skipped_like_any_other() -> None:
    state = begin(plan_of(A, B), Policy(), deadline_s=100.0)
    state = on_plan_capped(state, next_step(state, 0.0), reopen_in_s=42.0, now_s=0.0)  # type: ignore[arg-type]
    assert next_step(state, 0.0).entry.target.key == KB  # type: ignore[union-attr]
