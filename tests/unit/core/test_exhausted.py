"""Table tests for turnout.core.exhausted and `fallback.on_exhausted` (issue #45 item 4; SPEC §7;
seed 000: the last attempt's error when every entry fails; seed 003: the first attempt's error,
as the cause)."""

from __future__ import annotations

import msgspec
import pytest
from driver import drive, entry, err, plan_of, transport
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from turnout.core.exhausted import chosen_attempt, summary_header, upstream_status
from turnout.core.plan import Role
from turnout.core.policy import (
    BudgetPolicy,
    FallbackPolicy,
    OnExhausted,
    Policy,
    PolicyOverrides,
    RetryPolicy,
    merge_policy,
)
from turnout.core.types import Outcome, TransportError

A = entry("sim-a", "m-a", catalog_model="m")
B = entry("sim-b", "m-b", Role.PROVIDER_FALLBACK, catalog_model="m")
PLAN = plan_of(A, B)


def policy(on_exhausted: OnExhausted, *, cycles: int = 1) -> Policy:
    return Policy(
        retry=RetryPolicy(max_retries=1, base_ms=0),
        fallback=FallbackPolicy(on_exhausted=on_exhausted, max_cycles=cycles),
    )


FIRST = err(503, "sim-a is overloaded", code="overloaded", type_="server_error")
SECOND = err(503, "sim-a still overloaded")
LAST = err(500, "sim-b broke", code="internal", type_="api_error")

# (on_exhausted, cycles, status, type, code, message, should_retry)
CASES = [
    ("gateway", 1, 502, "upstream_error", "provider_failed", "No provider could serve `m`", False),
    ("last", 1, 500, "api_error", "internal", "sim-b broke", False),
    ("original", 1, 503, "server_error", "overloaded", "sim-a is overloaded", False),
    ("last", 2, 500, "api_error", "internal", "sim-b broke", False),
    ("original", 2, 503, "server_error", "overloaded", "sim-a is overloaded", False),
]


@pytest.mark.parametrize(("on_exhausted", "cycles", "status", "type_", "code", "message", "retry"), CASES)
def test_an_exhausted_plan_answers_as_on_exhausted_says(
    on_exhausted: OnExhausted, cycles: int, status: int, type_: str, code: str, message: str, retry: bool
) -> None:
    script = {"sim-a/m-a": [FIRST, SECOND] * cycles, "sim-b/m-b": [LAST] * cycles}
    run = drive(PLAN, policy(on_exhausted, cycles=cycles), script)
    verdict = run.verdict
    assert verdict is not None and len(run.records) == 3 * cycles
    assert (verdict.status_code, verdict.error_type, verdict.error_code) == (status, type_, code)
    assert verdict.message.startswith(message)
    assert verdict.should_retry is retry and verdict.retry_after_s is None
    assert verdict.upstream == (None if on_exhausted == "gateway" else on_exhausted)
    assert len(verdict.summary) == 3 * cycles  # the summary is kept (the shell puts it in a header)
    assert verdict.served.attempts == 3 * cycles


def test_every_failure_a_rate_limit_keeps_retry_after_and_should_retry_true() -> None:
    limited = err(429, "slow down", retry_after_s=2.2)
    run = drive(PLAN, policy("last"), {"sim-a/m-a": [limited, limited], "sim-b/m-b": [err(429, "b slow down")]})
    assert run.verdict is not None
    assert (run.verdict.status_code, run.verdict.message, run.verdict.error_type) == (
        429,
        "b slow down",
        "rate_limit_error",
    )
    assert (run.verdict.retry_after_s, run.verdict.should_retry) == (3, True)


@pytest.mark.parametrize(
    ("outcome", "status", "words"),
    [
        (transport(TransportError.ATTEMPT_TIMEOUT), 504, "attempt_timeout"),
        (transport(TransportError.RESET), 502, "reset"),
        (Outcome(status=200, error_in_body=True, message="boom in body", error_type="server_error"), 502, "boom"),
        (err(504, "gateway timeout upstream"), 504, "gateway timeout upstream"),
    ],
    ids=["timeout", "reset", "error-in-2xx-body", "upstream-504"],
)
def test_an_attempt_without_an_error_status_answers_502_or_504(outcome: Outcome, status: int, words: str) -> None:
    run = drive(
        plan_of(A),
        Policy(retry=RetryPolicy(max_retries=0), fallback=FallbackPolicy(on_exhausted="last")),
        {"sim-a/m-a": [outcome]},
    )
    assert run.verdict is not None
    assert run.verdict.status_code == status and words in run.verdict.message


@pytest.mark.parametrize("on_exhausted", ["last", "original"])
def test_terminal_deadline_and_unsupported_answers_are_unchanged(on_exhausted: OnExhausted) -> None:
    run = drive(PLAN, policy(on_exhausted), {"sim-a/m-a": [err(401, "bad key")]})
    assert run.verdict is not None and (run.verdict.status_code, run.verdict.upstream) == (401, None)
    slow = drive(PLAN, policy(on_exhausted), {"sim-a/m-a": [err(503)] * 5}, duration_s=100.0)
    assert slow.verdict is not None and (slow.verdict.status_code, slow.verdict.upstream) == (504, None)


@hsettings(max_examples=80, deadline=None)
@given(
    statuses=st.lists(st.sampled_from([500, 502, 503, 529, 429]), min_size=2, max_size=8),
    on_exhausted=st.sampled_from(["last", "original"]),
)
def test_the_answer_is_always_one_attempts_own_status(statuses: list[int], on_exhausted: OnExhausted) -> None:
    """Invariant: with `last`/`original`, an exhausted plan answers with exactly the status of
    the attempt it names, and never invents one (no 502 unless an attempt answered 502)."""
    script = {"sim-a/m-a": [err(s, f"a{i}") for i, s in enumerate(statuses)], "sim-b/m-b": [err(statuses[-1], "b")]}
    run = drive(PLAN, policy(on_exhausted), script)
    assert run.verdict is not None
    chosen = chosen_attempt(run.records, on_exhausted)
    assert chosen is not None and run.verdict.status_code == upstream_status(chosen) == chosen.status
    assert chosen is (run.records[-1] if on_exhausted == "last" else run.records[0])


def test_summary_header_lists_every_attempt() -> None:
    run = drive(PLAN, policy("last"), {"sim-a/m-a": [FIRST, transport()], "sim-b/m-b": [LAST]})
    assert summary_header(run.records) == (
        "1 sim-a/m-a 503 server_error 100ms, 2 sim-a/m-a - transport 100ms, 3 sim-b/m-b 500 server_error 100ms"
    )


@pytest.mark.parametrize("value", ["first", "", 1, None])
def test_an_unknown_on_exhausted_is_refused_naming_its_path(value: object) -> None:
    with pytest.raises(msgspec.ValidationError, match=r"at `\$\.fallback\.on_exhausted`"):
        merge_policy(Policy(), {"fallback": {"on_exhausted": value}})


def test_on_exhausted_defaults_to_gateway_and_merges() -> None:
    assert Policy().fallback.on_exhausted == "gateway"
    merged = merge_policy(Policy(), msgspec.convert({"fallback": {"on_exhausted": "original"}}, PolicyOverrides))
    assert merged.fallback.on_exhausted == "original"


@hsettings(max_examples=50, deadline=None)
@given(attempts=st.integers(1, 40), max_chars=st.integers(60, 600))
def test_summary_header_never_passes_its_cap_and_counts_what_it_leaves_out(attempts: int, max_chars: int) -> None:
    script = {"sim-a/m-a": [err(503, "down")] * attempts}
    policy = Policy(retry=RetryPolicy(max_retries=attempts - 1, base_ms=0), budget=BudgetPolicy(max_attempts=attempts))
    run = drive(plan_of(A), policy, script)
    assert len(run.records) == attempts
    text = summary_header(run.records, max_chars)
    assert len(text) <= max_chars
    shown = text.count("sim-a/m-a")
    if shown < attempts:
        assert text.endswith(f"... {attempts - shown} more")
