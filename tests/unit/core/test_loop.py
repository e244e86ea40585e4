"""Table tests for turnout.core.loop, driven with a fake clock (SPEC §3, §4, §5, §7).

The driver (`driver.py`) plays the shell: Wait advances the clock, each
attempt takes `duration_s`, outcomes are scripted per target key.
"""

from __future__ import annotations

import random
from typing import Any

import msgspec
import pytest
from driver import (
    Run,
    content_policy,
    context_length,
    drive,
    entry,
    err,
    ok,
    plan_of,
    quota,
    transport,
)

from turnout.core.loop import (
    Dispatch,
    GiveUp,
    SkipReason,
    StopReason,
    Wait,
    begin,
    next_step,
    on_outcome,
    on_skip,
)
from turnout.core.plan import Plan, Role, RoutingSettings, build_plan
from turnout.core.policy import Policy, merge_policy
from turnout.core.types import Disposition, FailureKind, Outcome, Target, TransportError
from turnout.core.verdict import conclude, served_facts

A = entry("openai", "gpt-5")
B = entry("azure", "gpt-5-prod", Role.PROVIDER_FALLBACK, catalog_model="gpt-5")
C = entry("anthropic", "claude", Role.MODEL_FALLBACK)
CW = entry("google", "gemini-long", Role.CONTEXT_WINDOW_FALLBACK)
CP = entry("mistral", "mistral-large", Role.CONTENT_POLICY_FALLBACK)
KA, KB, KC, KCW, KCP = (e.target.key for e in (A, B, C, CW, CP))

ABC = plan_of(A, B, C)


def pol(**sections: dict[str, Any]) -> Policy:
    """A policy from partial sections: `pol(retry={"max_retries": 2})`."""
    return merge_policy(Policy(), sections)


class MaxRandom(random.Random):
    """Jitter always at the top of its range."""

    def uniform(self, a: float, b: float) -> float:
        return b


class ZeroRandom(random.Random):
    """Jitter always 0: retries follow at once."""

    def uniform(self, a: float, b: float) -> float:
        return a


# --------------------------------------------------------------------- SPEC §4 worked example


def worked_example_plan() -> Plan:
    catalog = {
        "gpt-5": (
            Target(provider="openai", model="gpt-5", catalog_model="gpt-5"),
            Target(provider="azure", model="gpt-5-prod", catalog_model="gpt-5"),
        )
    }
    return build_plan(
        "gpt-5",
        catalog=catalog,
        providers=frozenset({"openai", "azure"}),
        settings=RoutingSettings(),
        policy=WORKED_POLICY,
        health={},
        rng=random.Random(0),
        orders={"gpt-5": "priority"},
    )


WORKED_POLICY = pol(
    retry={"max_retries": 1}, fallback={"enabled": True, "cross_provider_same_model": True}, budget={"max_attempts": 4}
)


def test_loop_spec_worked_example_primary_503_twice_then_second_provider_serves() -> None:
    run = drive(worked_example_plan(), WORKED_POLICY, {KA: [err(503), err(503)], KB: [ok()]})
    assert run.give_up == GiveUp(reason=StopReason.SERVED)
    assert run.keys == [KA, KA, KB]
    assert run.statuses == [503, 503, 200]
    assert run.verdict is None
    facts = served_facts(run.state)
    assert (facts.provider, facts.model, facts.attempts, facts.fallback, facts.reroute) == (
        "azure",
        "gpt-5-prod",
        3,
        True,
        False,
    )


def test_loop_spec_worked_example_first_attempt_401_is_one_attempt_and_a_401() -> None:
    run = drive(worked_example_plan(), WORKED_POLICY, {KA: [err(401, "Incorrect API key provided")]})
    assert run.give_up.reason is StopReason.TERMINAL
    assert run.keys == [KA]
    assert run.verdict is not None
    assert run.verdict.status_code == 401
    assert run.verdict.served.attempts == 1


# --------------------------------------------------------------------- retry then fallback


def test_loop_503_then_200_on_the_same_provider() -> None:
    run = drive(ABC, Policy(), {KA: [err(503), ok()]})
    assert run.give_up.reason is StopReason.SERVED
    assert run.keys == [KA, KA]
    assert served_facts(run.state).fallback is False


@pytest.mark.parametrize("status", [429, 500, 502, 503, 529], ids=lambda s: f"status-{s}")
def test_loop_retry_then_fallback_statuses_retry_once_then_fall_back(status: int) -> None:
    run = drive(ABC, Policy(), {KA: [err(status), err(status)], KB: [ok()]})
    assert run.keys == [KA, KA, KB]
    assert run.give_up.reason is StopReason.SERVED


@pytest.mark.parametrize("message", ["Rate limit exceeded for this key", "The server is currently overloaded"])
def test_loop_403_rate_limit_is_retried_then_falls_back_like_a_429(message: str) -> None:
    """Issue: a 403 whose body speaks of a rate limit got 1 attempt and no fallback."""
    run = drive(ABC, Policy(), {KA: [err(403, message), err(403, message)], KB: [ok()]})
    assert run.keys == [KA, KA, KB]
    assert run.give_up.reason is StopReason.SERVED


def test_loop_429_with_retry_after_2s_waits_exactly_2s_then_retries() -> None:
    run = drive(ABC, Policy(), {KA: [err(429, retry_after_s=2.0), ok()]}, duration_s=0.5)
    assert [w.delay_s for _, w in run.waits] == [2.0]
    assert run.waits[0][1].reason == "retry_after"
    assert run.waits[0][0] == 0.5
    assert run.keys == [KA, KA]
    second = run.records[1]
    assert second.started_s == 2.5
    assert (second.delay_before_s, second.delay_reason) == (2.0, "retry_after")


def test_loop_retry_after_90s_over_max_ms_falls_back_at_once() -> None:
    run = drive(ABC, pol(retry={"max_ms": 8000}), {KA: [err(429, retry_after_s=90.0)], KB: [ok()]}, duration_s=0.5)
    assert run.keys == [KA, KB]
    assert run.waits == []
    assert run.records[1].started_s == 0.5
    assert run.records[1].delay_before_s == 0.0


def test_loop_retry_after_ignored_without_respect_retry_after() -> None:
    run = drive(
        ABC, pol(retry={"respect_retry_after": False}), {KA: [err(429, retry_after_s=90.0), ok()]}, rng=MaxRandom()
    )
    assert run.keys == [KA, KA]
    assert [w.reason for _, w in run.waits] == ["backoff"]
    assert [w.delay_s for _, w in run.waits] == pytest.approx([0.25])


def test_loop_quota_exhausted_falls_back_without_retry_or_wait() -> None:
    run = drive(ABC, Policy(), {KA: [quota()], KB: [ok()]})
    assert run.keys == [KA, KB]
    assert run.records[0].kind is FailureKind.QUOTA_EXHAUSTED
    assert run.waits == []


def test_loop_quota_exhausted_falls_back_even_when_on_status_lists_nothing() -> None:
    run = drive(ABC, pol(fallback={"on_status": []}), {KA: [quota()], KB: [ok()]})
    assert run.keys == [KA, KB]


@pytest.mark.parametrize(
    "outcome",
    [
        err(408),
        err(504),
        transport(TransportError.ATTEMPT_TIMEOUT),
        transport(TransportError.FIRST_TOKEN_TIMEOUT),
        err(501),
        err(505),
        transport(TransportError.PROTOCOL),
    ],
    ids=["408", "504", "attempt-timeout", "first-token-timeout", "501", "505", "malformed"],
)
def test_loop_fallback_now_outcomes_fall_back_without_retry(outcome: Outcome) -> None:
    run = drive(ABC, Policy(), {KA: [outcome], KB: [ok()]})
    assert run.keys == [KA, KB]
    assert run.records[0].disposition is Disposition.FALLBACK_NOW


def test_loop_attempt_outlasting_its_timeout_falls_back() -> None:
    policy = pol(retry={"per_attempt_timeout_ms": 2000})
    run = drive(ABC, policy, {KA: [ok()], KB: [ok()]}, duration_s=lambda d: 5.0 if d.entry is A else 0.1)
    assert run.keys == [KA, KB]
    assert run.records[0].kind is FailureKind.TIMEOUT
    assert run.records[0].duration_ms == pytest.approx(2000.0)
    assert run.records[1].started_s == pytest.approx(2.0)


@pytest.mark.parametrize(
    "listed",
    [[504, 408], ["5xx", "4xx"], [408, 504, 501]],
    ids=["504-408-listed", "classes-listed", "mesh-list"],
)
def test_loop_an_answered_timeout_status_the_policy_lists_is_retried(listed: list[Any]) -> None:
    policy = pol(retry={"retry_on_status": listed, "max_retries": 2})
    run = drive(ABC, policy, {KA: [err(504), err(408), err(504)], KB: [ok()]})
    assert run.keys == [KA, KA, KA, KB]  # a list the operator writes means what it says


@pytest.mark.parametrize("listed", [[504], ["5xx"], [408]], ids=["504-listed", "5xx-listed", "408-listed"])
def test_loop_a_timeout_with_no_answer_is_never_retried_even_when_its_stand_in_is_listed(listed: list[Any]) -> None:
    run = drive(
        ABC, pol(retry={"retry_on_status": listed}), {KA: [transport(TransportError.ATTEMPT_TIMEOUT)], KB: [ok()]}
    )
    assert run.keys == [KA, KB]  # no status was received: the class decides


# --------------------------------------------------------------------- transport


def test_loop_transport_reset_is_retried_then_falls_back_by_default() -> None:
    run = drive(ABC, Policy(), {KA: [transport(), transport(TransportError.CONNECT)], KB: [ok()]})
    assert run.keys == [KA, KA, KB]
    assert [r.kind for r in run.records[:2]] == [FailureKind.TRANSPORT, FailureKind.TRANSPORT]
    assert run.records[0].status is None


@pytest.mark.parametrize(
    ("retry_on", "on_status", "expected_keys", "stop"),
    [
        ([503], [502], [KA, KA, KB], StopReason.SERVED),
        ([502], [502], [KA, KB], StopReason.SERVED),
        ([503], [503], [KA, KA], StopReason.EXHAUSTED),
        ([500], [500], [KA], StopReason.EXHAUSTED),
        (["5xx"], ["5xx"], [KA, KA, KB], StopReason.SERVED),
    ],
    ids=[
        "retried-as-503-fails-over-as-502",
        "502-not-a-retry-status",
        "503-not-a-fallback-status",
        "listed-neither",
        "classes",
    ],
)
def test_loop_transport_retried_as_503_and_fails_over_as_502(
    retry_on: list[Any], on_status: list[Any], expected_keys: list[str], stop: StopReason
) -> None:
    run = drive(
        ABC,
        pol(retry={"retry_on_status": retry_on}, fallback={"on_status": on_status}),
        {KA: [transport(), transport()], KB: [ok()]},
    )
    assert run.keys == expected_keys
    assert run.give_up.reason is stop


# --------------------------------------------------------------------- terminal and special lists


@pytest.mark.parametrize(
    ("outcome", "status"),
    [
        (err(400, "bad"), 400),
        (err(401), 401),
        (err(403, "forbidden"), 403),
        (err(404), 404),
        (err(413), 413),
        (err(422), 422),
    ],
    ids=["400", "401", "403", "404", "413", "422"],
)
def test_loop_terminal_outcome_is_one_attempt_and_its_status(outcome: Outcome, status: int) -> None:
    run = drive(ABC, Policy(), {KA: [outcome]})
    assert run.keys == [KA]
    assert run.give_up.reason is StopReason.TERMINAL
    assert run.verdict is not None and run.verdict.status_code == status


def test_loop_a_4xx_the_policy_lists_is_retried_then_falls_over() -> None:
    policy = pol(retry={"retry_on_status": ["4xx"]}, fallback={"on_status": ["4xx"]})
    run = drive(ABC, policy, {KA: [err(409), err(409)], KB: [ok()]})
    assert run.keys == [KA, KA, KB]
    assert run.give_up.reason is StopReason.SERVED


def test_loop_a_4xx_listed_only_for_retries_ends_as_itself_after_them() -> None:
    run = drive(ABC, pol(retry={"retry_on_status": [409]}), {KA: [err(409), err(409)], KB: [ok()]})
    assert run.keys == [KA, KA]
    assert run.give_up.reason is StopReason.TERMINAL
    assert run.verdict is not None and run.verdict.status_code == 409


def test_loop_the_default_lists_keep_every_4xx_terminal() -> None:
    run = drive(ABC, Policy(), {KA: [err(409)], KB: [ok()]})
    assert run.keys == [KA]


def test_loop_quota_is_decided_by_its_class_whatever_the_lists_say() -> None:
    run = drive(ABC, pol(retry={"retry_on_status": ["4xx"]}), {KA: [quota()], KB: [ok()]})
    assert run.keys == [KA, KB]


def test_loop_context_length_400_tries_the_context_window_entry_next() -> None:
    p = plan_of(A, B, C, context_window=[CW])
    run = drive(p, Policy(), {KA: [context_length()], KCW: [ok()]})
    assert run.keys == [KA, KCW]
    assert run.records[0].kind is FailureKind.CONTEXT_LENGTH
    assert run.records[1].role is Role.CONTEXT_WINDOW_FALLBACK
    assert run.records[1].is_fallback is True
    assert run.give_up.reason is StopReason.SERVED


def test_loop_content_policy_400_tries_the_content_policy_entry_next() -> None:
    p = plan_of(A, B, C, content_policy=[CP])
    run = drive(p, Policy(), {KA: [content_policy()], KCP: [ok()]})
    assert run.keys == [KA, KCP]
    assert run.records[0].kind is FailureKind.CONTENT_POLICY
    assert run.records[1].role is Role.CONTENT_POLICY_FALLBACK


@pytest.mark.parametrize(
    ("outcome", "p"),
    [
        (context_length(), plan_of(A, B, C)),
        (context_length(), plan_of(A, B, C, content_policy=[CP])),
        (content_policy(), plan_of(A, B, C)),
        (content_policy(), plan_of(A, B, C, context_window=[CW])),
        (err(400, "invalid 'messages'"), plan_of(A, B, C, context_window=[CW], content_policy=[CP])),
    ],
    ids=[
        "context-without-list",
        "context-with-only-content-list",
        "content-without-list",
        "content-with-only-context-list",
        "plain-400-ignores-special-lists",
    ],
)
def test_loop_400_without_its_special_list_is_terminal_after_one_attempt(outcome: Outcome, p: Plan) -> None:
    run = drive(p, Policy(), {KA: [outcome]})
    assert run.keys == [KA]
    assert run.give_up.reason is StopReason.TERMINAL
    assert run.verdict is not None and run.verdict.status_code == 400


def test_loop_special_list_is_switched_to_only_once() -> None:
    cw2 = entry("google", "gemini-xl", Role.CONTEXT_WINDOW_FALLBACK)
    p = plan_of(A, B, context_window=[CW, cw2], content_policy=[CP])
    run = drive(p, Policy(), {KA: [context_length()], KCW: [content_policy()]})
    assert run.keys == [KA, KCW]
    assert run.give_up.reason is StopReason.TERMINAL


def test_loop_special_list_walks_on_after_server_errors_then_stops_at_its_end() -> None:
    cw2 = entry("google", "gemini-xl", Role.CONTEXT_WINDOW_FALLBACK)
    p = plan_of(A, B, C, context_window=[CW, cw2])
    run = drive(
        p, pol(fallback={"max_cycles": 3}), {KA: [context_length()], KCW: [err(500)], cw2.target.key: [err(502)]}
    )
    assert run.keys == [KA, KCW, cw2.target.key]  # fallback targets get no retry; no cycle over a special list
    assert run.give_up.reason is StopReason.EXHAUSTED


def test_loop_fallback_disabled_does_not_switch_to_a_special_list() -> None:
    p = plan_of(A, B, context_window=[CW], content_policy=[CP])
    policy = pol(fallback={"enabled": False})
    for outcome in (context_length(), content_policy()):
        run = drive(p, policy, {KA: [outcome]})
        assert run.keys == [KA]
        assert run.give_up.reason is StopReason.TERMINAL


# --------------------------------------------------------------------- policy overrides


def test_loop_empty_retry_on_status_means_no_retry() -> None:
    run = drive(ABC, pol(retry={"retry_on_status": []}), {KA: [err(503)], KB: [ok()]})
    assert run.keys == [KA, KB]


def test_loop_on_status_without_429_stops_with_exhausted_after_the_retries() -> None:
    run = drive(ABC, pol(fallback={"on_status": [408, "5xx"]}), {KA: [err(429), err(429)]})
    assert run.keys == [KA, KA]
    assert run.give_up.reason is StopReason.EXHAUSTED
    assert run.verdict is not None and run.verdict.status_code == 429


def test_loop_on_status_class_string_allows_fallback() -> None:
    run = drive(
        ABC,
        pol(retry={"max_retries": 0}, fallback={"on_status": ["5XX"]}),
        {KA: [err(503)], KB: [err(500)], KC: [ok()]},
    )
    assert run.keys == [KA, KB, KC]


def test_loop_fallback_disabled_never_leaves_the_first_target() -> None:
    run = drive(ABC, pol(fallback={"enabled": False}), {KA: [err(503), err(503)]})
    assert run.keys == [KA, KA]
    assert run.give_up.reason is StopReason.EXHAUSTED
    assert run.verdict is not None and run.verdict.status_code == 502


def test_loop_fallback_disabled_stops_at_once_on_fallback_now() -> None:
    run = drive(ABC, pol(fallback={"enabled": False}), {KA: [quota()]})
    assert run.keys == [KA]
    assert run.give_up.reason is StopReason.EXHAUSTED


@pytest.mark.parametrize(
    ("fallback_target_retries", "expected"),
    [(0, [KA, KA, KB, KC]), (1, [KA, KA, KB, KB, KC])],
    ids=["default-one-attempt-per-fallback", "one-retry-per-fallback"],
)
def test_loop_fallback_target_retries(fallback_target_retries: int, expected: list[str]) -> None:
    run = drive(
        ABC,
        pol(retry={"fallback_target_retries": fallback_target_retries}),
        {KA: [err(503)] * 2, KB: [err(503)] * 2, KC: [ok()]},
    )
    assert run.keys == expected


@pytest.mark.parametrize(
    ("max_retries", "expected"),
    [(0, [KA, KB]), (1, [KA, KA, KB]), (3, [KA, KA, KA, KA, KB])],
    ids=["no-retry", "one-retry", "three-retries"],
)
def test_loop_primary_gets_max_retries(max_retries: int, expected: list[str]) -> None:
    run = drive(ABC, pol(retry={"max_retries": max_retries}), {KA: [err(500)] * 4, KB: [ok()]})
    assert run.keys == expected
    assert [r.resend_count for r in run.records if r.target.key == KA] == list(range(max_retries + 1))


def test_loop_max_cycles_2_restarts_from_the_primary() -> None:
    run = drive(
        plan_of(A, B), pol(retry={"max_retries": 0}, fallback={"max_cycles": 2}), {KA: [err(503), ok()], KB: [err(503)]}
    )
    assert run.keys == [KA, KB, KA]
    assert [r.cycle for r in run.records] == [1, 1, 2]
    assert run.give_up.reason is StopReason.SERVED


def test_loop_max_cycles_2_exhausts_after_two_passes() -> None:
    run = drive(
        plan_of(A, B),
        pol(retry={"max_retries": 0}, fallback={"max_cycles": 2}),
        {KA: [err(503)] * 2, KB: [err(503)] * 2},
    )
    assert run.keys == [KA, KB, KA, KB]
    assert run.give_up.reason is StopReason.EXHAUSTED


def test_loop_max_cycles_1_does_not_restart() -> None:
    run = drive(plan_of(A, B), pol(retry={"max_retries": 0}), {KA: [err(503)], KB: [err(503)]})
    assert run.keys == [KA, KB]


@pytest.mark.parametrize(
    ("max_attempts", "expected"),
    [(1, [KA]), (2, [KA, KA]), (3, [KA, KA, KB]), (4, [KA, KA, KB, KC])],
    ids=["1", "2", "3", "4"],
)
def test_loop_max_attempts_caps_the_attempts(max_attempts: int, expected: list[str]) -> None:
    run = drive(
        ABC,
        pol(budget={"max_attempts": max_attempts}, fallback={"max_cycles": 3}),
        {KA: [err(503)] * 6, KB: [err(503)] * 3, KC: [err(503)] * 3},
    )
    assert run.keys == expected
    assert run.give_up.reason is StopReason.EXHAUSTED


def test_loop_max_attempts_reached_gives_up_without_a_pointless_wait() -> None:
    run = drive(ABC, pol(budget={"max_attempts": 1}, fallback={"backoff_ms": 1000}), {KA: [err(503)]})
    assert run.waits == []
    assert run.give_up.reason is StopReason.EXHAUSTED


# --------------------------------------------------------------------- deadline


def test_loop_first_dispatch_timeout_is_the_smaller_of_attempt_timeout_and_time_left() -> None:
    policy = pol(retry={"per_attempt_timeout_ms": 2000})
    state = begin(ABC, policy, deadline_s=100.0)
    step = next_step(state, 0.0)
    assert isinstance(step, Dispatch) and step.timeout_s == 2.0
    step = next_step(state, 99.5)
    assert isinstance(step, Dispatch) and step.timeout_s == pytest.approx(0.5)


@pytest.mark.parametrize("at_s", [10.0, 10.5], ids=["at-deadline", "after-deadline"])
def test_loop_nothing_starts_at_or_after_the_deadline(at_s: float) -> None:
    state = begin(ABC, Policy(), deadline_s=10.0)
    assert next_step(state, at_s) == GiveUp(reason=StopReason.DEADLINE)


@pytest.mark.parametrize(
    ("attempt_s", "expected"),
    [(9.9, [KA, KB]), (9.75, [KA, KB]), (9.7, [KA, KA])],
    ids=["retry-would-start-after", "retry-would-start-exactly-at", "retry-fits"],
)
def test_loop_retry_starting_at_or_after_the_deadline_is_not_scheduled(attempt_s: float, expected: list[str]) -> None:
    # Full jitter at its top: the first retry waits base_ms = 0.25 s.
    run = drive(
        ABC,
        Policy(),
        {KA: [err(503), ok()], KB: [ok()]},
        deadline_s=10.0,
        rng=MaxRandom(),
        duration_s=lambda d: attempt_s if d.number == 1 else 0.01,
    )
    assert run.keys == expected
    assert all(t + w.delay_s < 10.0 for t, w in run.waits)


@pytest.mark.parametrize(
    ("hint_s", "expected"),
    [(1.0, [KA, KB]), (1.5, [KA, KB]), (0.99, [KA, KA])],
    ids=["hint-equals-time-left", "hint-beyond-deadline", "hint-fits"],
)
def test_loop_retry_after_reaching_the_deadline_falls_back(hint_s: float, expected: list[str]) -> None:
    run = drive(
        ABC,
        Policy(),
        {KA: [err(429, retry_after_s=hint_s), ok()], KB: [ok()]},
        deadline_s=10.0,
        duration_s=lambda d: 9.0 if d.number == 1 else 0.001,
    )
    assert run.keys == expected


def test_loop_deadline_during_an_attempt_gives_504_budget_exhausted() -> None:
    run = drive(ABC, Policy(), {KA: [ok()]}, deadline_s=5.0, duration_s=6.0)
    assert run.keys == [KA]
    assert run.records[0].kind is FailureKind.TIMEOUT
    assert run.now_s == 5.0
    assert run.give_up.reason is StopReason.DEADLINE
    assert run.verdict is not None
    assert (run.verdict.status_code, run.verdict.error_code) == (504, "budget_exhausted")
    assert len(run.verdict.summary) == 1


def test_loop_deadline_after_several_attempts_reports_them_all() -> None:
    run = drive(
        ABC, pol(retry={"max_retries": 0}), {KA: [err(503)], KB: [err(503)], KC: [ok()]}, deadline_s=5.0, duration_s=2.5
    )
    assert run.keys == [KA, KB]
    assert run.give_up.reason is StopReason.DEADLINE
    assert run.verdict is not None and run.verdict.status_code == 504
    assert [row.attempt for row in run.verdict.summary] == [1, 2]


# --------------------------------------------------------------------- fallback backoff


def test_loop_fallback_backoff_waits_before_the_next_target() -> None:
    run = drive(
        ABC, pol(retry={"max_retries": 0}, fallback={"backoff_ms": 500}), {KA: [err(500)], KB: [ok()]}, duration_s=0.1
    )
    assert [(t, w.delay_s, w.reason) for t, w in run.waits] == [(0.1, 0.5, "fallback_backoff")]
    assert run.records[1].started_s == pytest.approx(0.6)
    assert (run.records[1].delay_before_s, run.records[1].delay_reason) == (0.5, "fallback_backoff")


def test_loop_fallback_backoff_past_the_deadline_stops_with_deadline() -> None:
    run = drive(
        ABC,
        pol(retry={"max_retries": 0}, fallback={"backoff_ms": 2000}),
        {KA: [err(500)]},
        deadline_s=2.0,
        duration_s=0.5,
    )
    assert run.keys == [KA]
    assert run.waits == []
    assert run.give_up.reason is StopReason.DEADLINE


def test_loop_no_fallback_backoff_after_a_skip() -> None:
    run = drive(
        ABC,
        pol(fallback={"backoff_ms": 500}),
        {KB: [ok()]},
        skip=lambda d, now: (SkipReason.CIRCUIT_OPEN, 5.0) if d.entry is A else None,
    )
    assert run.waits == []
    assert run.keys == [KB]


# --------------------------------------------------------------------- skips (SPEC §5)


def test_loop_skipped_target_is_not_an_attempt() -> None:
    run = drive(
        ABC, Policy(), {KB: [ok()]}, skip=lambda d, now: (SkipReason.CIRCUIT_OPEN, 12.5) if d.entry is A else None
    )
    assert run.keys == [KB]
    assert run.records[0].number == 1
    assert run.records[0].is_retry is False
    assert [(s.target.key, s.reason, s.reopen_in_s) for s in run.state.skips] == [
        (KA, SkipReason.CIRCUIT_OPEN, 12.5),
    ]
    assert served_facts(run.state).attempts == 1


def test_loop_an_unsupported_target_is_passed_over_even_with_fallback_off() -> None:
    """The skip is no attempt and no failure: the next target is tried with fallback disabled,
    and a plan ending in nothing but such skips is EXHAUSTED (the verdict's 400), never ALL_OPEN."""
    unsupported = lambda d, now: (SkipReason.UNSUPPORTED, None) if d.entry is A else None
    run = drive(ABC, pol(fallback={"enabled": False}), {KB: [ok()]}, skip=unsupported)
    assert run.keys == [KB] and run.records[0].number == 1
    everything = drive(ABC, Policy(), {}, skip=lambda d, now: (SkipReason.UNSUPPORTED, None))
    assert everything.records == () and everything.give_up.reason is StopReason.EXHAUSTED
    assert everything.verdict is not None and everything.verdict.status_code == 400


@pytest.mark.parametrize("reason", [SkipReason.CIRCUIT_OPEN, SkipReason.RAMPING, SkipReason.UNSUPPORTED])
def test_loop_another_provider_reached_by_skips_alone_is_no_fallback(reason: SkipReason) -> None:
    """Skipped, not tried: the next provider of the requested model serves as the plan's
    primary would (a plan that left the target out says fallback 0 too); after a failed
    attempt it is a fallback, and so is another model after skips alone."""
    skipped_a = drive(ABC, Policy(), {KB: [ok()]}, skip=lambda d, now: (reason, 5.0) if d.entry is A else None)
    assert [(r.target.key, r.is_fallback) for r in skipped_a.records] == [(KB, False)]
    assert served_facts(skipped_a.state).fallback is False
    failed_a = drive(ABC, Policy(), {KA: [err(500)] * 10, KB: [ok()]})
    assert [(r.target.key, r.is_fallback) for r in failed_a.records][-1] == (KB, True)
    skipped_ab = drive(ABC, Policy(), {KC: [ok()]}, skip=lambda d, now: (reason, 5.0) if d.entry is not C else None)
    assert [(r.target.key, r.is_fallback) for r in skipped_ab.records] == [(KC, True)]


def test_loop_every_target_skipped_open_answers_503_with_the_shortest_cooldown() -> None:
    reopen = {KA: 12.5, KB: 3.2, KC: 30.0}
    run = drive(ABC, Policy(), {}, skip=lambda d, now: (SkipReason.CIRCUIT_OPEN, reopen[d.entry.target.key]))
    assert run.records == ()
    assert run.give_up.reason is StopReason.ALL_OPEN
    assert run.verdict is not None
    assert (run.verdict.status_code, run.verdict.error_code, run.verdict.retry_after_s) == (503, "circuit_open", 4)


def test_loop_every_target_skipped_open_over_two_cycles_is_still_all_open() -> None:
    run = drive(ABC, pol(fallback={"max_cycles": 2}), {}, skip=lambda d, now: (SkipReason.CIRCUIT_OPEN, 7.0))
    assert len(run.state.skips) == 6
    assert run.give_up.reason is StopReason.ALL_OPEN


def test_loop_every_target_without_credential_is_exhausted_502() -> None:
    run = drive(ABC, Policy(), {}, skip=lambda d, now: (SkipReason.NO_CREDENTIAL, None))
    assert run.records == ()
    assert run.give_up.reason is StopReason.EXHAUSTED
    assert run.verdict is not None
    assert (run.verdict.status_code, run.verdict.error_code) == (502, "provider_failed")


def test_loop_some_open_some_without_credential_is_all_open() -> None:
    run = drive(
        ABC,
        Policy(),
        {},
        skip=lambda d, now: (SkipReason.CIRCUIT_OPEN, 9.0) if d.entry is B else (SkipReason.NO_CREDENTIAL, None),
    )
    assert run.give_up.reason is StopReason.ALL_OPEN
    assert run.verdict is not None and run.verdict.retry_after_s == 9


def test_loop_skips_after_a_failed_attempt_end_as_exhausted_not_all_open() -> None:
    run = drive(
        ABC,
        pol(retry={"max_retries": 0}),
        {KA: [err(500)]},
        skip=lambda d, now: None if d.entry is A else (SkipReason.CIRCUIT_OPEN, 5.0),
    )
    assert run.keys == [KA]
    assert run.give_up.reason is StopReason.EXHAUSTED
    assert run.verdict is not None and run.verdict.status_code == 502


def test_loop_skipping_a_scheduled_retry_moves_to_the_next_target() -> None:
    opened: set[str] = set()

    def skip(d: Dispatch, now: float) -> tuple[SkipReason, float | None] | None:
        if d.is_retry:
            opened.add(d.entry.target.key)
        return (SkipReason.CIRCUIT_OPEN, 30.0) if d.entry.target.key in opened else None

    run = drive(ABC, Policy(), {KA: [err(503)], KB: [ok()]}, skip=skip)
    assert run.keys == [KA, KB]
    assert run.records[1].is_retry is False and run.records[1].resend_count == 0


# --------------------------------------------------------------------- verdict of a loop


def test_loop_every_failure_a_rate_limit_answers_429_with_the_shortest_hint() -> None:
    run = drive(
        ABC,
        Policy(),
        {
            KA: [err(429, retry_after_s=5.0), err(429, retry_after_s=3.0)],
            KB: [err(429, retry_after_s=7.0)],
            KC: [err(429)],
        },
    )
    assert run.keys == [KA, KA, KB, KC]
    assert run.give_up.reason is StopReason.EXHAUSTED
    assert run.verdict is not None
    assert (run.verdict.status_code, run.verdict.retry_after_s) == (429, 3)


def test_loop_rate_limits_mixed_with_other_failures_answer_502() -> None:
    run = drive(ABC, Policy(), {KA: [err(429), err(429)], KB: [err(503)], KC: [err(429)]})
    assert run.verdict is not None
    assert (run.verdict.status_code, run.verdict.error_code) == (502, "provider_failed")


def test_loop_reroute_exhausted_answers_502_and_never_calls_the_requested_model() -> None:
    catalog = {
        "gpt-5": (Target(provider="openai", model="gpt-5", catalog_model="gpt-5"),),
        "claude": (Target(provider="anthropic", model="claude", catalog_model="claude"),),
    }
    p = build_plan(
        "gpt-5",
        catalog=catalog,
        providers=frozenset({"openai", "anthropic"}),
        settings=RoutingSettings(reroutes=("claude",)),
        policy=Policy(),
        health={},
        rng=random.Random(0),
    )
    run = drive(p, Policy(), {"anthropic/claude": [err(503), err(500)]})
    assert run.keys == ["anthropic/claude", "anthropic/claude"]
    assert run.give_up.reason is StopReason.EXHAUSTED
    assert run.verdict is not None
    assert (run.verdict.status_code, run.verdict.error_code) == (502, "provider_failed")
    assert run.verdict.served.reroute is True
    assert all(r.is_reroute for r in run.records)


def test_loop_empty_plan_gives_up_at_once() -> None:
    state = begin(plan_of(requested_model="gpt-5"), Policy(), deadline_s=10.0)
    assert next_step(state, 0.0) == GiveUp(reason=StopReason.EXHAUSTED)


def test_loop_cancelled_attempt_stops_the_loop() -> None:
    state = begin(ABC, Policy(), deadline_s=10.0)
    step = next_step(state, 0.0)
    assert isinstance(step, Dispatch)
    state = on_outcome(
        state, step, Outcome(), started_s=0.0, now_s=0.2, rng=random.Random(0), kind=FailureKind.CANCELLED
    )
    assert next_step(state, 0.2) == GiveUp(reason=StopReason.CANCELLED)
    assert conclude(state, StopReason.CANCELLED).status_code == 499


def test_loop_states_are_never_mutated() -> None:
    state = begin(ABC, Policy(), deadline_s=10.0)
    before = msgspec.structs.asdict(state)
    step = next_step(state, 0.0)
    assert isinstance(step, Dispatch)
    on_outcome(state, step, err(503), started_s=0.0, now_s=0.1, rng=random.Random(0))
    on_skip(state, step, reason=SkipReason.CIRCUIT_OPEN, reopen_in_s=1.0, now_s=0.0)
    assert msgspec.structs.asdict(state) == before


# --------------------------------------------------------------------- attempt records


def test_loop_attempt_records_carry_the_decision_facts() -> None:
    policy = pol(retry={"max_retries": 1}, fallback={"backoff_ms": 100})
    run: Run = drive(
        ABC,
        policy,
        {KA: [err(503, "overloaded", code="server_busy"), err(429, "slow down", retry_after_s=0.3)], KB: [ok()]},
        duration_s=0.2,
        rng=MaxRandom(),
    )
    r1, r2, r3 = run.records
    assert [r.number for r in run.records] == [1, 2, 3]

    assert (r1.target.key, r1.role, r1.is_retry, r1.is_fallback, r1.is_reroute, r1.resend_count, r1.cycle) == (
        KA,
        Role.PRIMARY,
        False,
        False,
        False,
        0,
        1,
    )
    assert (r1.kind, r1.disposition, r1.status, r1.error_code, r1.message) == (
        FailureKind.SERVER_ERROR,
        Disposition.RETRY_THEN_FALLBACK,
        503,
        "server_busy",
        "overloaded",
    )
    assert (r1.delay_before_s, r1.delay_reason, r1.started_s) == (0.0, None, 0.0)
    assert r1.duration_ms == pytest.approx(200.0)

    assert (r2.target.key, r2.is_retry, r2.is_fallback, r2.resend_count) == (KA, True, False, 1)
    assert (r2.delay_before_s, r2.delay_reason) == (0.25, "backoff")
    assert r2.started_s == pytest.approx(0.45)
    assert (r2.kind, r2.retry_after_s) == (FailureKind.RATE_LIMITED, 0.3)

    assert (r3.target.key, r3.role, r3.is_retry, r3.is_fallback, r3.resend_count) == (
        KB,
        Role.PROVIDER_FALLBACK,
        False,
        True,
        0,
    )
    assert (r3.delay_before_s, r3.delay_reason) == (0.1, "fallback_backoff")
    assert r3.started_s == pytest.approx(0.75)
    assert (r3.kind, r3.disposition, r3.message) == (FailureKind.SUCCESS, Disposition.SUCCESS, "")


def test_loop_dispatch_numbers_and_waits_line_up_with_records() -> None:
    run = drive(ABC, Policy(), {KA: [err(503), err(503)], KB: [err(502)], KC: [ok()]}, rng=random.Random(5))
    dispatches = [s for _, s in run.steps if isinstance(s, Dispatch)]
    assert [d.number for d in dispatches] == [1, 2, 3, 4]
    assert [d.is_retry for d in dispatches] == [False, True, False, False]
    assert all(isinstance(s, Wait) and s.reason == "backoff" for _, s in run.waits)
    assert len(run.waits) <= 1  # a jitter of exactly 0 needs no wait
