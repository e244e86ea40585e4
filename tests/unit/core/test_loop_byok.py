"""Credential fallback in the pure loop (SPEC §6): a rejected tenant key is retried once on the shared key."""

from __future__ import annotations

import random
from collections.abc import Sequence

from driver import entry, err, ok, plan_of

from turnout.core.loop import Dispatch, GiveUp, LoopState, StopReason, Wait, begin, next_step, on_outcome
from turnout.core.plan import Plan, Role
from turnout.core.policy import Policy, merge_policy
from turnout.core.types import Outcome
from turnout.core.verdict import conclude, served_facts

A = entry("openai", "gpt-5")
B = entry("azure", "gpt-5-prod", Role.PROVIDER_FALLBACK, catalog_model="gpt-5")


def run(
    plan: Plan,
    outcomes: Sequence[Outcome],
    *,
    own_on: frozenset[str] = frozenset({"openai"}),
    policy: Policy = Policy(),
) -> tuple[LoopState, list[Dispatch]]:
    """Drive the loop like the router: an attempt carries the tenant key on `own_on` providers
    (and may fall back to the shared key) unless the dispatch is already the credential fallback."""
    state = begin(plan, policy, deadline_s=100.0)
    now, rng = 0.0, random.Random(0)
    dispatched: list[Dispatch] = []
    script = list(outcomes)
    while True:
        step = next_step(state, now)
        if isinstance(step, GiveUp):
            return state, dispatched
        if isinstance(step, Wait):
            now += step.delay_s
            continue
        dispatched.append(step)
        own = step.entry.target.provider in own_on and not step.is_byok_fallback
        state = on_outcome(state, step, script.pop(0), started_s=now, now_s=now + 0.1, rng=rng, credential_fallback=own)
        now += 0.1


def test_rejected_own_key_is_retried_once_on_the_shared_key_of_the_same_target() -> None:
    state, dispatched = run(plan_of(A, B), [err(401, "bad key"), ok()])
    assert state.stop is StopReason.SERVED
    assert [d.entry.target.key for d in dispatched] == [A.target.key, A.target.key]
    assert [d.is_byok_fallback for d in dispatched] == [False, True]
    assert [r.is_byok_fallback for r in state.records] == [False, True]
    assert [r.is_retry for r in state.records] == [False, False]
    facts = served_facts(state)
    assert facts.byok_fallback and facts.attempts == 2 and facts.provider == "openai"


def test_shared_key_rejected_too_is_terminal_not_a_second_credential_fallback() -> None:
    state, dispatched = run(plan_of(A, B), [err(403, "forbidden"), err(401, "bad shared key")])
    assert state.stop is StopReason.TERMINAL
    assert len(dispatched) == 2
    assert conclude(state, StopReason.TERMINAL).status_code == 401


def test_no_credential_fallback_when_the_attempt_carried_no_tenant_key() -> None:
    state, dispatched = run(plan_of(A, B), [err(401, "bad key")], own_on=frozenset())
    assert state.stop is StopReason.TERMINAL and len(dispatched) == 1
    assert not served_facts(state).byok_fallback


def test_credential_fallback_respects_max_attempts() -> None:
    policy = merge_policy(Policy(), {"budget": {"max_attempts": 1}})
    state, dispatched = run(plan_of(A, B), [err(401, "bad key")], policy=policy)
    assert state.stop is StopReason.TERMINAL and len(dispatched) == 1
    assert conclude(state, StopReason.TERMINAL).status_code == 401


def test_shared_key_failing_over_moves_on_and_the_next_target_is_not_a_credential_fallback() -> None:
    state, dispatched = run(plan_of(A, B), [err(401, "bad key"), err(503), err(503), ok()])
    assert state.stop is StopReason.SERVED
    assert [(d.entry.target.provider, d.is_byok_fallback, d.is_retry) for d in dispatched] == [
        ("openai", False, False),
        ("openai", True, False),
        ("openai", True, True),
        ("azure", False, False),
    ]
    assert not served_facts(state).byok_fallback


def test_rate_limit_on_own_key_is_not_a_credential_fallback() -> None:
    state, dispatched = run(plan_of(A, B), [err(429), err(429), ok()])
    assert not any(d.is_byok_fallback for d in dispatched)
    assert state.stop is StopReason.SERVED
