"""The provider's `x-should-retry` (OpenAI's API sends it; the official SDKs obey it before the
status): `false` stops re-sending to that target, the fallback still allowed by policy; `true`
allows a retry the status alone would not; both kept on the attempt record (issue: honour the
upstream's retry hints)."""

from __future__ import annotations

import httpx
import msgspec
from driver import drive, entry, err, ok, plan_of
from hypothesis import given
from hypothesis import strategies as st

from turnout.adapters.base import error_status_outcome
from turnout.core.hints import should_retry_hint
from turnout.core.loop import StopReason
from turnout.core.plan import Role
from turnout.core.policy import Policy, merge_policy
from turnout.core.types import Outcome

A = entry("openai", "gpt-5")
B = entry("azure", "gpt-5-prod", Role.PROVIDER_FALLBACK, catalog_model="gpt-5")
KA, KB = A.target.key, B.target.key
AB = plan_of(A, B)


def said(outcome: Outcome, word: bool) -> Outcome:
    return msgspec.structs.replace(outcome, should_retry=word)


def test_the_header_is_read_whatever_its_case_and_anything_else_is_no_word() -> None:
    assert should_retry_hint({"X-Should-Retry": "false"}) is False
    assert should_retry_hint({"x-should-retry": " TRUE "}) is True
    assert should_retry_hint({"x-should-retry": "maybe"}) is None
    assert should_retry_hint({}) is None


def test_an_error_answer_keeps_the_providers_word() -> None:
    headers = httpx.Headers({"x-should-retry": "false"})
    assert error_status_outcome(503, headers, b"{}", 0.0).outcome.should_retry is False


def test_a_503_the_provider_says_not_to_retry_goes_to_the_fallback_at_once() -> None:
    run = drive(AB, Policy(), {KA: [said(err(503), False)], KB: [ok()]})
    assert run.keys == [KA, KB]
    assert run.give_up.reason is StopReason.SERVED
    assert run.records[0].should_retry is False


def test_without_the_word_the_503_is_retried_as_before() -> None:
    run = drive(AB, Policy(), {KA: [err(503), ok()]})
    assert run.keys == [KA, KA]
    assert run.records[0].should_retry is None


def test_with_fallback_off_a_no_retry_503_is_the_answer() -> None:
    policy = merge_policy(Policy(), {"fallback": {"enabled": False}})
    run = drive(AB, policy, {KA: [said(err(503), False)]})
    assert run.keys == [KA]
    assert run.give_up.reason is StopReason.EXHAUSTED


def test_the_providers_true_retries_a_status_the_lists_leave_out() -> None:
    policy = merge_policy(Policy(), {"retry": {"retry_on_status": [429]}})
    run = drive(AB, policy, {KA: [said(err(503), True), ok()]})
    assert run.keys == [KA, KA]
    assert run.records[0].should_retry is True


def test_the_providers_true_retries_a_fall_back_now_failure_once() -> None:
    run = drive(AB, Policy(), {KA: [said(err(501), True), said(err(501), True)], KB: [ok()]})
    assert run.keys == [KA, KA, KB]  # the target's retries still bound it


def test_a_terminal_failure_stays_terminal_whatever_the_provider_says() -> None:
    run = drive(AB, Policy(), {KA: [said(err(400), True)], KB: [ok()]})
    assert run.keys == [KA]
    assert run.give_up.reason is StopReason.TERMINAL


@given(st.lists(st.sampled_from([429, 500, 502, 503, 529, 501, 504]), min_size=1, max_size=4))
def test_a_target_that_says_false_is_never_sent_the_request_twice(statuses: list[int]) -> None:
    script = {KA: [said(err(s), False) for s in statuses], KB: [ok()]}
    run = drive(AB, Policy(), script)
    assert run.keys.count(KA) == 1
