"""Operator ceilings high enough for the seeds' defaults (issue #45 item 5; SPEC §4 ceilings;
seed 003's model fallback chains: `maxTransientRetries` 3 on the active model, a 3-model chain,
at most 3 cycles, then the first error as the cause)."""

from __future__ import annotations

import random

import pytest
from driver import drive, entry, err, plan_of
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from turnout.core.loop import StopReason
from turnout.core.plan import Role
from turnout.core.policy import BudgetPolicy, Ceilings, Clamp, FallbackPolicy, Policy, RetryPolicy, clamp_policy

CHAIN = plan_of(
    entry("anthropic", "claude-sonnet-4-5"),
    entry("openrouter", "claude-sonnet-4.5", Role.MODEL_FALLBACK),
    entry("openai", "gpt-5", Role.MODEL_FALLBACK),
)
"""seed 003's example chain: `anthropic/claude-sonnet-4-5` → `openrouter/…` → `openai/gpt-5`."""
MODELS, RETRIES, CYCLES = 3, 3, 3
NEEDED = CYCLES * MODELS * (1 + RETRIES)


def empryo(*, base_ms: int = 1000, max_attempts: int = NEEDED, latency_ms: int = 180_000) -> Policy:
    """seed 003's defaults as a Turnout policy (`baseDelayMs` 1000)."""
    return Policy(
        retry=RetryPolicy(max_retries=RETRIES, fallback_target_retries=RETRIES, base_ms=base_ms, max_ms=8000),
        fallback=FallbackPolicy(max_cycles=CYCLES),
        budget=BudgetPolicy(max_attempts=max_attempts, max_total_latency_ms=latency_ms),
    )


FIT = Ceilings(max_retries=RETRIES, max_attempts=NEEDED, max_cycles=CYCLES)


def test_empryo_needs_36_attempts() -> None:
    assert NEEDED == 36


@pytest.mark.parametrize(
    ("ceilings", "clamps"),
    [
        (FIT, ()),
        (Ceilings(max_attempts=1000, max_cycles=10), ()),
        (Ceilings(), (Clamp(path="budget.max_attempts", requested=36, applied=6),)),
        (
            Ceilings(max_retries=2, max_attempts=NEEDED),
            (
                Clamp(path="retry.max_retries", requested=3, applied=2),
                Clamp(path="retry.fallback_target_retries", requested=3, applied=2),
            ),
        ),
    ],
    ids=["just-enough", "generous", "spec-defaults-clamp-to-6", "retries-ceiling-too-low"],
)
def test_empryo_policy_fits_only_ceilings_that_hold_it(ceilings: Ceilings, clamps: tuple[Clamp, ...]) -> None:
    _, got = clamp_policy(empryo(), ceilings)
    assert got == clamps


def test_empryo_chain_runs_three_cycles_of_four_attempts_per_model_then_the_original_error() -> None:
    policy, _ = clamp_policy(empryo(), FIT)
    first = err(529, "Overloaded", type_="overloaded_error")
    script = {e.target.key: [first] + [err(503)] * 11 for e in CHAIN.entries}
    run = drive(CHAIN, policy, script, duration_s=0.5, rng=random.Random(7))
    assert len(run.records) == NEEDED and run.give_up.reason is StopReason.EXHAUSTED
    per_cycle = [e.target.key for e in CHAIN.entries for _ in range(1 + RETRIES)]
    assert run.keys == per_cycle * CYCLES
    assert [r.cycle for r in run.records] == [c for c in (1, 2, 3) for _ in range(MODELS * (1 + RETRIES))]
    assert run.verdict is not None and "Original: anthropic/claude-sonnet-4-5 answered 529" in run.verdict.message


def test_the_time_budget_still_bounds_a_high_ceiling() -> None:
    policy, _ = clamp_policy(empryo(latency_ms=60_000), FIT)
    run = drive(CHAIN, policy, {e.target.key: [err(503)] * 12 for e in CHAIN.entries}, duration_s=5.0)
    assert run.give_up.reason is StopReason.DEADLINE and len(run.records) < NEEDED
    assert run.verdict is not None and run.verdict.status_code == 504
    assert all(start < 60.0 for start, _, _ in run.attempts)


@hsettings(max_examples=60, deadline=None)
@given(
    duration_s=st.floats(0.01, 20.0),
    latency_ms=st.integers(1_000, 180_000),
    base_ms=st.sampled_from([0, 250, 1000]),
    seed=st.integers(0, 10_000),
)
def test_attempts_never_pass_the_ceiling_nor_start_past_the_deadline(
    duration_s: float, latency_ms: int, base_ms: int, seed: int
) -> None:
    """Invariant: whatever the ceilings let through, the loop makes at most `max_attempts`
    attempts and starts none at or after the deadline (SPEC §3 steps 2 and 5)."""
    policy, _ = clamp_policy(empryo(base_ms=base_ms, latency_ms=latency_ms), FIT)
    run = drive(
        CHAIN,
        policy,
        {e.target.key: [err(503)] * 12 for e in CHAIN.entries},
        duration_s=duration_s,
        rng=random.Random(seed),
    )
    assert len(run.records) <= NEEDED
    assert all(start < latency_ms / 1000 for start, _, _ in run.attempts)
