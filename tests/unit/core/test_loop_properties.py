"""Property tests for turnout.core.loop over random policies, plans and outcomes.

Each example draws a policy within the default ceilings, a plan built by
`build_plan` from a random catalog (1–4 models × 1–3 offers, with or without
a reroute list and special fallback lists), and then, attempt by attempt, an
outcome (status, transport error, optional Retry-After), an attempt duration
and optionally a breaker skip. The driver runs the loop on a fake clock.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from typing import Any

from driver import Run, drive
from hypothesis import given, settings
from hypothesis import strategies as st

from turnout.core.classify import status_for_lists, status_matches
from turnout.core.loop import UNAVAILABLE_SKIPS, Dispatch, SkipReason, StopReason
from turnout.core.ordering import Standing, TargetHealth
from turnout.core.plan import Plan, Role, RoutingSettings, build_plan
from turnout.core.policy import Ceilings, Policy, clamp_policy, merge_policy
from turnout.core.types import Disposition, FailureKind, Outcome, Target, TransportError
from turnout.core.verdict import conclude, served_facts

STATUSES = [200, 400, 401, 403, 404, 408, 429, 500, 501, 502, 503, 504, 529]
LIST_ENTRIES: list[int | str] = [400, 401, 408, 429, 500, 502, 503, 504, 529, "5xx", "4xx"]
MODELS = ["m0", "m1", "m2", "m3"]
PROVIDERS = ["p0", "p1", "p2"]
SPECIAL_ROLES = {Role.CONTEXT_WINDOW_FALLBACK, Role.CONTENT_POLICY_FALLBACK}

PROPERTY_SETTINGS = settings(max_examples=300, deadline=None)


# --------------------------------------------------------------------- strategies


@st.composite
def policies(draw: st.DrawFn) -> Policy:
    base_ms = draw(st.integers(250, 5000))
    override: dict[str, Any] = {
        "retry": {
            "max_retries": draw(st.sampled_from([0, 1, 1, 2, 3, 6])),
            "retry_on_status": draw(st.lists(st.sampled_from(LIST_ENTRIES), max_size=5)),
            "base_ms": base_ms,
            "max_ms": draw(st.integers(base_ms, 20_000)),
            "respect_retry_after": draw(st.booleans()),
            "per_attempt_timeout_ms": draw(st.one_of(st.just(120_000), st.integers(100, 180_000))),
            "fallback_target_retries": draw(st.sampled_from([0, 0, 1, 2, 6])),
        },
        "fallback": {
            "enabled": draw(st.sampled_from([True, True, False])),
            "cross_provider_same_model": draw(st.sampled_from([True, True, True, False])),
            "models": draw(st.lists(st.sampled_from(MODELS), max_size=3)),
            "backoff_ms": draw(st.sampled_from([0, 0, 100, 1000, 5000])),
            "on_status": draw(st.lists(st.sampled_from(LIST_ENTRIES), max_size=5)),
            "max_cycles": draw(st.sampled_from([1, 1, 2, 3])),
        },
        "budget": {
            "max_attempts": draw(st.sampled_from([1, 2, 3, 4, 5, 6, 6, 6])),
            "max_total_latency_ms": draw(
                st.one_of(st.just(180_000), st.integers(1_000, 180_000), st.integers(1, 1_000))
            ),
        },
    }
    if draw(st.sampled_from([True, True, False])):  # mostly keep the SPEC's default lists
        override["retry"].pop("retry_on_status")
        override["fallback"].pop("on_status")
    policy, clamps = clamp_policy(merge_policy(Policy(), override), Ceilings())
    assert clamps == ()
    return policy


@dataclass(frozen=True)
class Scenario:
    plan: Plan
    policy: Policy
    start_s: float
    skips: bool


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    policy = draw(policies())
    n_models = draw(st.sampled_from([1, 2, 3, 4, 4]))
    models = MODELS[:n_models]
    catalog: dict[str, tuple[Target, ...]] = {}
    for m in models:
        providers = draw(st.permutations(PROVIDERS))[: draw(st.sampled_from([1, 2, 3, 3]))]
        catalog[m] = tuple(Target(provider=p, model=f"{m}@{p}", catalog_model=m) for p in providers)
    others = models[1:]
    some_models = st.lists(st.sampled_from(models), max_size=3)
    use_reroutes = bool(others) and draw(st.booleans())
    reroutes = draw(st.lists(st.sampled_from(others), min_size=1, max_size=3)) if use_reroutes else []
    settings_ = RoutingSettings(
        reroutes=tuple(reroutes),
        fallbacks={
            "*": draw(some_models.map(tuple)),
            **draw(st.dictionaries(st.sampled_from(models), some_models.map(tuple), max_size=1)),
        },
        context_window_fallbacks={"*": draw(some_models.map(tuple))},
        content_policy_fallbacks={"*": draw(some_models.map(tuple))},
    )
    requested = "m0"
    if not reroutes and draw(st.sampled_from([False, False, False, True])):
        requested = f"{catalog['m0'][0].provider}/m0"  # pinned
    plan = build_plan(
        requested,
        catalog=catalog,
        providers=frozenset(PROVIDERS),
        settings=settings_,
        policy=policy,
        health=draw(
            st.dictionaries(
                st.sampled_from([t.key for ts in catalog.values() for t in ts]),
                st.builds(TargetHealth, score=st.floats(0.01, 1), standing=st.sampled_from(Standing)),
                max_size=3,
            )
        ),
        rng=random.Random(draw(st.integers(0, 2**32))),
    )
    return Scenario(plan=plan, policy=policy, start_s=draw(st.sampled_from([0.0, 1234.5])), skips=draw(st.booleans()))


def _outcomes() -> st.SearchStrategy[Outcome]:
    hint = st.one_of(st.none(), st.floats(0, 120), st.sampled_from([0.0, 1.0, 2.0, 30.0]))
    plain = st.builds(
        lambda s, h: Outcome(status=s, retry_after_s=h, message="upstream says no"), st.sampled_from(STATUSES), hint
    )
    retryable = st.builds(
        lambda s, h: Outcome(status=s, retry_after_s=h, message="try later"),
        st.sampled_from([429, 500, 502, 503, 529]),
        hint,
    )
    special = st.sampled_from(
        [
            Outcome(status=400, message="maximum context length is 8192 tokens", error_code="context_length_exceeded"),
            Outcome(status=400, message="blocked by the content management policy", error_code="content_filter"),
            Outcome(status=429, message="You exceeded your current quota", error_code="insufficient_quota"),
            Outcome(status=403, message="rate limit exceeded"),
        ]
    )
    envelope = st.builds(
        lambda t: Outcome(status=200, error_in_body=True, error_type=t, message="error in body"),
        st.sampled_from(
            [
                "invalid_request_error",
                "authentication_error",
                "rate_limit_error",
                "overloaded_error",
                "server_error",
                "permission_error",
                "weird",
            ]
        ),
    )
    transport = st.builds(lambda k: Outcome(transport=k, message=str(k)), st.sampled_from(list(TransportError)))
    return st.one_of(plain, retryable, retryable, special, envelope, transport)


OUTCOMES = _outcomes()
DURATIONS = st.one_of(st.floats(0, 0.5), st.floats(0, 0.5), st.floats(0, 5), st.floats(0, 200))


def run_scenario(data: st.DataObject) -> tuple[Scenario, Run]:
    sc = data.draw(scenarios(), label="scenario")

    def outcome(d: Dispatch, now: float) -> Outcome:
        return data.draw(OUTCOMES, label=f"outcome of attempt {d.number}")

    def duration(d: Dispatch) -> float:
        return data.draw(DURATIONS, label=f"duration of attempt {d.number}")

    def skip(d: Dispatch, now: float) -> tuple[SkipReason, float | None] | None:
        if not sc.skips or not data.draw(st.booleans(), label="skip?"):
            return None
        reason = data.draw(st.sampled_from(list(SkipReason)), label="skip reason")
        return reason, (data.draw(st.floats(0.01, 300), label="reopen") if reason in UNAVAILABLE_SKIPS else None)

    run = drive(
        sc.plan,
        sc.policy,
        outcome,
        duration_s=duration,
        start_s=sc.start_s,
        skip=skip,
        rng=random.Random(data.draw(st.integers(0, 2**32), label="rng seed")),
        max_steps=500,
    )
    return sc, run


def deadline_of(sc: Scenario) -> float:
    return sc.start_s + sc.policy.budget.max_total_latency_ms / 1000.0


def allowance(policy: Policy, role: Role) -> int:
    return policy.retry.max_retries if role is Role.PRIMARY else policy.retry.fallback_target_retries


# --------------------------------------------------------------------- properties


def listed(policy: Policy, record: Any) -> bool:
    """A terminal record the policy's own lists name (its received status in `retry_on_status`,
    or in `on_status` with fallback on): it may be followed by another attempt."""
    status = record.status
    if status is None or not 400 <= status <= 599 or record.kind in (FailureKind.QUOTA_EXHAUSTED,):
        return False
    return status_matches(status, policy.retry.retry_on_status) or (
        policy.fallback.enabled and status_matches(status, policy.fallback.on_status)
    )


@PROPERTY_SETTINGS
@given(st.data())
def test_property_attempts_never_exceed_max_attempts(data: st.DataObject) -> None:
    sc, run = run_scenario(data)
    assert len(run.records) <= sc.policy.budget.max_attempts
    assert [r.number for r in run.records] == list(range(1, len(run.records) + 1))
    assert served_facts(run.state).attempts == len(run.records)


@PROPERTY_SETTINGS
@given(st.data())
def test_property_nothing_starts_or_sleeps_past_the_deadline(data: st.DataObject) -> None:
    sc, run = run_scenario(data)
    deadline = deadline_of(sc)
    for start, _, dispatch in run.attempts:
        assert start < deadline
        assert 0 < dispatch.timeout_s <= sc.policy.retry.per_attempt_timeout_ms / 1000.0
        assert start + dispatch.timeout_s <= deadline + 1e-9
    for at, wait in run.waits:
        assert wait.delay_s > 0
        assert at + wait.delay_s <= deadline + 1e-9
        assert wait.reason in {"backoff", "retry_after", "fallback_backoff"}


@PROPERTY_SETTINGS
@given(st.data())
def test_property_terminal_outcome_is_last_unless_it_switches_to_a_special_list(data: st.DataObject) -> None:
    sc, run = run_scenario(data)
    records = run.records
    for before, after in itertools.pairwise(records):
        assert before.disposition is not Disposition.SUCCESS
        if before.disposition is Disposition.TERMINAL and not listed(sc.policy, before):
            assert before.kind in {FailureKind.CONTEXT_LENGTH, FailureKind.CONTENT_POLICY}
            assert before.role not in SPECIAL_ROLES
            expected = (
                Role.CONTEXT_WINDOW_FALLBACK
                if before.kind is FailureKind.CONTEXT_LENGTH
                else Role.CONTENT_POLICY_FALLBACK
            )
            assert after.role is expected
    if run.give_up.reason is StopReason.TERMINAL:
        assert records and records[-1].disposition is Disposition.TERMINAL


@PROPERTY_SETTINGS
@given(st.data())
def test_property_rerouted_requests_never_attempt_the_requested_model(data: st.DataObject) -> None:
    sc, run = run_scenario(data)
    if not sc.plan.rerouted:
        return
    requested = sc.plan.requested_model
    assert all(r.target.catalog_model != requested for r in run.records)
    assert all(s.target.catalog_model != requested for s in run.state.skips)


@PROPERTY_SETTINGS
@given(st.data())
def test_property_retries_stay_within_each_targets_allowance(data: st.DataObject) -> None:
    sc, run = run_scenario(data)
    records = run.records
    for i, r in enumerate(records):
        if not r.is_retry:
            assert r.resend_count == 0
            continue
        prev = records[i - 1]
        assert i > 0
        assert prev.target == r.target and prev.cycle == r.cycle and prev.role == r.role
        assert prev.disposition is Disposition.RETRY_THEN_FALLBACK or (
            prev.status is not None and status_matches(prev.status, sc.policy.retry.retry_on_status)
        )
        assert r.resend_count == prev.resend_count + 1
        assert r.resend_count <= allowance(sc.policy, r.role)
        assert r.delay_reason in {"backoff", "retry_after"}
    # Consecutive attempts on one target within one pass: 1 + allowance at most.
    run_len = 0
    for i, r in enumerate(records):
        same = i > 0 and records[i - 1].target == r.target and records[i - 1].cycle == r.cycle and r.is_retry
        run_len = run_len + 1 if same else 1
        assert run_len <= 1 + allowance(sc.policy, r.role)


@PROPERTY_SETTINGS
@given(st.data())
def test_property_retries_only_follow_statuses_in_retry_on_status(data: st.DataObject) -> None:
    sc, run = run_scenario(data)
    records = run.records
    for prev, r in itertools.pairwise(records):
        if r.is_retry:
            outcome = Outcome(status=prev.status, error_code=prev.error_code, message=prev.message)
            status = status_for_lists(outcome, prev.kind, purpose="retry")
            if prev.status is not None and 200 <= prev.status < 300:
                continue  # an error envelope: its status came from the body
            assert status_matches(status, sc.policy.retry.retry_on_status)


@PROPERTY_SETTINGS
@given(st.data())
def test_property_fallback_disabled_never_leaves_the_first_model(data: st.DataObject) -> None:
    sc, run = run_scenario(data)
    if sc.policy.fallback.enabled or not sc.plan.entries:
        return
    first_model = sc.plan.entries[0].target.catalog_model
    assert all(r.target.catalog_model == first_model for r in run.records)


@PROPERTY_SETTINGS
@given(st.data())
def test_property_loop_terminates_with_a_client_error_status_when_not_served(data: st.DataObject) -> None:
    _, run = run_scenario(data)  # `drive` fails the test after 500 steps
    reason = run.give_up.reason
    assert reason is not StopReason.CANCELLED
    if reason is StopReason.SERVED:
        assert run.records and run.records[-1].kind is FailureKind.SUCCESS
        assert run.verdict is None
        return
    assert all(r.kind is not FailureKind.SUCCESS for r in run.records)
    verdict = conclude(run.state, reason)
    assert 400 <= verdict.status_code <= 599
    assert len(verdict.summary) == len(run.records)
    if reason is StopReason.ALL_OPEN:
        assert run.records == ()
        assert any(s.reason in UNAVAILABLE_SKIPS for s in run.state.skips)
        assert verdict.status_code == 503 and verdict.retry_after_s is not None and verdict.retry_after_s >= 1
    if reason is StopReason.DEADLINE:
        assert verdict.status_code == 504
