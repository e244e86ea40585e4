"""Limits per org, squad and key (SPEC §10): the pure admission decision."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnout.core.limits import (
    WINDOW_MS,
    CeilingExceeded,
    Counters,
    Demand,
    Limits,
    ScopeLimits,
    check_ceilings,
    decide,
    estimate_tokens,
    header_duration,
    is_limited,
)

T0 = 1_700_000_000_000
REQ = Demand(tokens=0, stream=False, lease_ms=30_000)


def key_scope(**limits: int) -> ScopeLimits:
    return ScopeLimits(kind="key", org="acme", id="bot", limits=Limits(**limits))


def run(scopes: list[ScopeLimits], times_ms: list[int], demand: Demand = REQ) -> list[bool]:
    counters = tuple(Counters() for _ in scopes)
    admitted = []
    for now in times_ms:
        decision = decide(scopes, counters, demand, now)
        counters = decision.counters
        admitted.append(decision.verdict.admitted)
    return admitted


def test_limits_rpm_10_admits_10_at_once_then_refuses_with_the_wait_to_the_next_slot() -> None:
    scopes = [key_scope(rpm=10)]
    counters: tuple[Counters, ...] = (Counters(),)
    for _ in range(10):
        decision = decide(scopes, counters, REQ, T0)
        assert decision.verdict.admitted
        counters = decision.counters
    refused = decide(scopes, counters, REQ, T0)
    assert refused.verdict.refusal is not None
    assert refused.verdict.refusal.limit == "rpm"
    assert refused.verdict.refusal.retry_after_ms == 6_000  # one request's share of the minute
    assert refused.counters == counters
    assert refused.verdict.requests is not None
    assert (refused.verdict.requests.remaining, refused.verdict.requests.reset_ms) == (0, 60_000)
    assert decide(scopes, counters, REQ, T0 + 5_999).verdict.admitted is False
    assert decide(scopes, counters, REQ, T0 + 6_000).verdict.admitted is True


def test_limits_rpm_7_admits_exactly_7_in_a_burst() -> None:
    assert run([key_scope(rpm=7)], [T0] * 8) == [True] * 7 + [False]


def test_limits_quota_after_admission_counts_the_request() -> None:
    decision = decide([key_scope(rpm=10, tpm=1000)], (Counters(),), Demand(tokens=100, stream=False, lease_ms=1), T0)
    assert decision.verdict.requests is not None and decision.verdict.tokens is not None
    assert (decision.verdict.requests.limit, decision.verdict.requests.remaining) == (10, 9)
    assert decision.verdict.requests.reset_ms == 6_000
    assert (decision.verdict.tokens.remaining, decision.verdict.tokens.reset_ms) == (900, 6_000)


def test_limits_org_counter_is_shared_and_a_refusal_counts_against_no_scope() -> None:
    org = ScopeLimits(kind="org", org="acme", limits=Limits(rpm=3))
    key = key_scope(rpm=2)
    counters: tuple[Counters, ...] = (Counters(), Counters())
    for _ in range(2):
        decision = decide([org, key], counters, REQ, T0)
        assert decision.verdict.admitted
        counters = decision.counters
    refused = decide([org, key], counters, REQ, T0)
    assert refused.verdict.refusal is not None and refused.verdict.refusal.scope == 1
    # a sibling key shares the org's counter (1 left there) but not this key's
    sibling = decide(
        [org, ScopeLimits(kind="key", org="acme", id="other", limits=Limits())], (counters[0], Counters()), REQ, T0
    )
    assert sibling.verdict.admitted
    assert decide([org], (sibling.counters[0],), REQ, T0).verdict.refusal is not None


def test_limits_refusal_names_the_longest_wait() -> None:
    org = ScopeLimits(kind="org", org="acme", limits=Limits(rpm=60))  # 1 s per request
    key = key_scope(rpm=1)  # 60 s per request
    decision = decide([org, key], (Counters(), Counters()), REQ, T0)
    second = decide([org, key], decision.counters, REQ, T0)
    assert second.verdict.refusal is not None
    assert (second.verdict.refusal.limit, second.verdict.refusal.scope) == ("rpm", 1)
    assert second.verdict.refusal.retry_after_ms == 60_000


def test_limits_tpm_larger_than_the_limit_never_fits() -> None:
    decision = decide([key_scope(tpm=100)], (Counters(),), Demand(tokens=101, stream=False, lease_ms=1), T0)
    assert decision.verdict.refusal is not None
    assert (decision.verdict.refusal.limit, decision.verdict.refusal.retry_after_ms) == ("tpm", None)


def test_limits_concurrency_leases_count_until_they_expire() -> None:
    scopes = [key_scope(max_concurrent=2)]
    demand = Demand(tokens=0, stream=False, lease_ms=1_000)
    assert run(scopes, [T0, T0 + 1, T0 + 2, T0 + 1_000, T0 + 1_001, T0 + 1_002], demand) == [
        True,
        True,
        False,
        True,
        True,
        False,
    ]


def test_limits_streams_count_against_both_concurrency_limits() -> None:
    scopes = [key_scope(max_concurrent=3, max_streams=1)]
    stream = Demand(tokens=0, stream=True, lease_ms=1_000)
    first = decide(scopes, (Counters(),), stream, T0)
    assert first.verdict.admitted
    second = decide(scopes, first.counters, stream, T0)
    assert second.verdict.refusal is not None and second.verdict.refusal.limit == "max_streams"
    plain = decide(scopes, first.counters, REQ, T0)
    assert plain.verdict.admitted and len(plain.counters[0].leases) == 2


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        ({"max_tokens": 100}, None),
        ({"max_tokens": 4097}, CeilingExceeded(field="max_tokens", value=4097, ceiling=4096, scope="squad acme/r")),
        (
            {"max_completion_tokens": 5000},
            CeilingExceeded(field="max_completion_tokens", value=5000, ceiling=4096, scope="squad acme/r"),
        ),
        ({"n": 3}, CeilingExceeded(field="n", value=3, ceiling=2, scope="org acme")),
        ({}, None),
    ],
    ids=["under", "max_tokens_over_lowest", "max_completion_tokens_over", "n_over", "absent"],
)
def test_limits_ceilings_refuse_above_the_lowest_in_force(
    requested: dict[str, int],
    expected: CeilingExceeded | None,
) -> None:
    scopes = [
        ScopeLimits(kind="org", org="acme", limits=Limits(max_tokens=8192, max_n=2)),
        ScopeLimits(kind="squad", org="acme", id="r", limits=Limits(max_tokens=4096)),
    ]
    assert check_ceilings(scopes, requested) == expected


@pytest.mark.parametrize(
    ("ms", "text"),
    [(0, "0ms"), (350, "350ms"), (1_000, "1s"), (1_001, "2s"), (90_000, "1m30s"), (3_720_000, "1h2m0s")],
)
def test_limits_header_duration_is_openai_style(ms: int, text: str) -> None:
    assert header_duration(ms) == text


def test_limits_token_estimate_is_a_quarter_of_the_body_plus_the_completion() -> None:
    assert estimate_tokens(401, 100, 2) == 101 + 200
    assert estimate_tokens(8, None, 3) == 2


def test_limits_setting_rejects_zero_and_unknown_fields() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"Expected `int` >= 1 - at `\$.rpm`"):
        msgspec.convert({"rpm": 0}, Limits)
    with pytest.raises(msgspec.ValidationError, match="unknown field `rps`"):
        msgspec.convert({"rps": 1}, Limits)
    assert not is_limited([key_scope(max_tokens=10)])
    assert is_limited([key_scope(rpm=1)])


# properties -----------------------------------------------------------------

gaps = st.lists(st.tuples(st.integers(0, 20_000), st.integers(1, 50)), min_size=1, max_size=60)


@settings(max_examples=300, deadline=None)
@given(limit=st.integers(1, 200), events=gaps)
def test_limits_property_no_span_admits_more_than_burst_plus_rate(limit: int, events: list[tuple[int, int]]) -> None:
    """Over any span of d ms, admitted units ≤ limit + limit·d/60 000 (GCRA with a one-window burst)."""
    scopes = [key_scope(tpm=limit)]
    counters: tuple[Counters, ...] = (Counters(),)
    now = T0
    admitted: list[tuple[int, int]] = []
    for gap_ms, tokens in events:
        now += gap_ms
        decision = decide(scopes, counters, Demand(tokens=tokens, stream=False, lease_ms=1), now)
        counters = decision.counters
        if decision.verdict.admitted:
            admitted.append((now, tokens))
    for i, (start, _) in enumerate(admitted):
        total = 0
        for at, tokens in admitted[i:]:
            total += tokens
            assert total * WINDOW_MS <= limit * WINDOW_MS + limit * (at - start)


@settings(max_examples=300, deadline=None)
@given(limit=st.integers(1, 200), events=gaps, tokens=st.integers(1, 200))
def test_limits_property_retry_after_is_exact(limit: int, events: list[tuple[int, int]], tokens: int) -> None:
    """A refused request that can fit is admitted exactly `retry_after_ms` later, not 1 ms sooner."""
    scopes = [key_scope(tpm=limit)]
    counters: tuple[Counters, ...] = (Counters(),)
    now = T0
    for gap_ms, cost in events:
        now += gap_ms
        counters = decide(scopes, counters, Demand(tokens=cost, stream=False, lease_ms=1), now).counters
    demand = Demand(tokens=tokens, stream=False, lease_ms=1)
    decision = decide(scopes, counters, demand, now)
    refusal = decision.verdict.refusal
    if refusal is None:
        return
    if tokens > limit:
        assert refusal.retry_after_ms is None
        return
    assert refusal.retry_after_ms is not None and refusal.retry_after_ms > 0
    assert decide(scopes, counters, demand, now + refusal.retry_after_ms).verdict.admitted
    assert not decide(scopes, counters, demand, now + refusal.retry_after_ms - 1).verdict.admitted


@settings(max_examples=200, deadline=None)
@given(
    limits=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    arrivals=st.lists(st.integers(0, 400), min_size=1, max_size=40),
)
def test_limits_property_concurrency_never_exceeds_any_scope(limits: list[int], arrivals: list[int]) -> None:
    """Leases alive at any time never exceed any scope's `max_concurrent`."""
    scopes = [
        ScopeLimits(kind="key", org="o", id=str(i), limits=Limits(max_concurrent=m)) for i, m in enumerate(limits)
    ]
    counters = tuple(Counters() for _ in scopes)
    now = T0
    for gap in arrivals:
        now += gap
        counters = decide(scopes, counters, Demand(tokens=0, stream=False, lease_ms=1_000), now).counters
        for limit, held in zip(limits, counters, strict=True):
            assert sum(1 for e in held.leases if e > now) <= limit
