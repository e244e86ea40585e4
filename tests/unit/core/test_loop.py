"""Table tests for turnout.core.loop, driven with a fake clock (SPEC §3, §4, §7): retries, fallback,
terminal outcomes and special lists, policy overrides.

The driver (`driver.py`) plays the shell: Wait advances the clock, each
attempt takes `duration_s`, outcomes are scripted per target key.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from driver import (
    ABC,
    CP,
    CW,
    KA,
    KB,
    KC,
    KCP,
    KCW,
    A,
    B,
    C,
    MaxRandom,
    content_policy,
    context_length,
    drive,
    entry,
    err,
    ok,
    plan_of,
    pol,
    quota,
    transport,
)

from turnout.core.loop import (
    GiveUp,
    StopReason,
)
from turnout.core.plan import Plan, Role, RoutingSettings, build_plan
from turnout.core.policy import Policy
from turnout.core.types import Disposition, FailureKind, Outcome, Target, TransportError
from turnout.core.verdict import served_facts

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
