"""`retry.stall_retries` (issue #45 item 10, seed 003's opt-in `maxStallRetries`): a stream that
sent nothing before its first-token timeout is re-sent to the same target up to that many times;
off by default, where every timeout falls over at once (SPEC §3)."""

from __future__ import annotations

from typing import Any

import pytest
from driver import drive, entry, err, ok, plan_of, transport
from hypothesis import given
from hypothesis import strategies as st

from turnout.core.plan import Role
from turnout.core.policy import Ceilings, Policy, clamp_policy, merge_policy
from turnout.core.types import TransportError

A = entry("openai", "gpt-5")
B = entry("azure", "gpt-5-prod", Role.PROVIDER_FALLBACK, catalog_model="gpt-5")
KA, KB = A.target.key, B.target.key
AB = plan_of(A, B)
STALL = TransportError.FIRST_TOKEN_TIMEOUT


def pol(**retry: Any) -> Policy:
    return merge_policy(Policy(), {"retry": {"base_ms": 0, **retry}})


def test_a_stall_falls_over_at_once_by_default() -> None:
    run = drive(AB, pol(), {KA: [transport(STALL), ok()], KB: [ok()]})
    assert run.keys == [KA, KB]


@pytest.mark.parametrize("retries", [1, 2, 3])
def test_stall_retries_re_send_to_the_same_target_that_many_times(retries: int) -> None:
    run = drive(AB, pol(stall_retries=retries), {KA: [transport(STALL)] * (retries + 1), KB: [ok()]})
    assert run.keys == [KA] * (retries + 1) + [KB]


def test_a_stalled_target_that_answers_on_its_retry_serves() -> None:
    run = drive(AB, pol(stall_retries=2), {KA: [transport(STALL), ok()], KB: [ok()]})
    assert run.keys == [KA, KA]


def test_stall_retries_do_not_retry_other_timeouts_or_statuses() -> None:
    """Only a first-token timeout is a stall: an attempt timeout and a 504 keep their class."""
    for first in (transport(TransportError.ATTEMPT_TIMEOUT), err(504)):
        run = drive(AB, pol(stall_retries=3), {KA: [first, ok()], KB: [ok()]})
        assert run.keys == [KA, KB]


def test_stall_retries_are_bounded_by_the_max_retries_ceiling() -> None:
    policy, clamps = clamp_policy(pol(stall_retries=50), Ceilings(max_retries=4))
    assert policy.retry.stall_retries == 4 and [c.path for c in clamps] == ["retry.stall_retries"]


@given(retries=st.integers(0, 6), stalls=st.integers(0, 8), max_attempts=st.integers(1, 10))
def test_stall_retries_never_exceed_their_count_nor_the_attempt_budget(
    retries: int, stalls: int, max_attempts: int
) -> None:
    policy = merge_policy(
        Policy(), {"retry": {"base_ms": 0, "stall_retries": retries}, "budget": {"max_attempts": max_attempts}}
    )
    run = drive(AB, policy, {KA: [transport(STALL)] * stalls + [ok()] * 10, KB: [ok()] * 10})
    on_a = run.keys.count(KA)
    assert on_a <= 1 + retries and len(run.keys) <= max_attempts
