"""Table tests for turnout.core.verdict (SPEC §7: what the client sees)."""

from __future__ import annotations

import msgspec
import pytest
from driver import entry, plan_of

from turnout.core.classify import DISPOSITION
from turnout.core.loop import AttemptRecord, LoopState, SkipReason, SkipRecord, StopReason, begin
from turnout.core.plan import PlanEntry, Role
from turnout.core.policy import Policy
from turnout.core.types import FailureKind
from turnout.core.verdict import AttemptSummary, Served, conclude, served_facts, summarize

K = FailureKind
A = entry("openai", "gpt-5")
B = entry("azure", "gpt-5-prod", Role.PROVIDER_FALLBACK, catalog_model="gpt-5")
R = entry("anthropic", "claude", Role.PRIMARY, is_reroute=True)
PLAN = plan_of(A, B, requested_model="gpt-5")


def rec(
    number: int,
    kind: FailureKind,
    status: int | None,
    *,
    at: PlanEntry = A,
    message: str = "",
    code: str | None = None,
    retry_after_s: float | None = None,
    duration_ms: float = 120.4,
) -> AttemptRecord:
    return AttemptRecord(
        number=number,
        target=at.target,
        role=at.role,
        is_retry=False,
        is_fallback=at.is_fallback,
        is_reroute=at.is_reroute,
        resend_count=0,
        cycle=1,
        kind=kind,
        disposition=DISPOSITION[kind],
        status=status,
        error_code=code,
        message=message,
        retry_after_s=retry_after_s,
        delay_before_s=0.0,
        delay_reason=None,
        started_s=0.0,
        duration_ms=duration_ms,
    )


def state_with(*records: AttemptRecord, skips: tuple[SkipRecord, ...] = ()) -> LoopState:
    return msgspec.structs.replace(begin(PLAN, Policy(), deadline_s=100.0), records=records, skips=skips)


def open_skip(reopen_in_s: float | None, at: PlanEntry = A) -> SkipRecord:
    return SkipRecord(target=at.target, reason=SkipReason.CIRCUIT_OPEN, reopen_in_s=reopen_in_s)


# --------------------------------------------------------------------- TERMINAL


@pytest.mark.parametrize(
    ("kind", "status", "error_type"),
    [
        (K.AUTH, 401, "authentication_error"),
        (K.AUTH, 403, "authentication_error"),
        (K.CLIENT_ERROR, 400, "invalid_request_error"),
        (K.CLIENT_ERROR, 404, "invalid_request_error"),
        (K.CLIENT_ERROR, 413, "invalid_request_error"),
        (K.CLIENT_ERROR, 422, "invalid_request_error"),
        (K.CONTEXT_LENGTH, 400, "invalid_request_error"),
        (K.CONTENT_POLICY, 400, "invalid_request_error"),
        (K.CONTENT_POLICY, 403, "invalid_request_error"),
    ],
    ids=["401", "403-auth", "400", "404", "413", "422", "context-length", "content-policy", "403-content-policy"],
)
def test_verdict_terminal_passes_the_providers_status_on(kind: FailureKind, status: int, error_type: str) -> None:
    v = conclude(state_with(rec(1, kind, status, message="Nope: bad thing", code="some_code")), StopReason.TERMINAL)
    code = "context_length_exceeded" if kind is K.CONTEXT_LENGTH else "some_code"
    assert (v.status_code, v.error_type, v.error_code) == (status, error_type, code)
    assert v.message == "The upstream provider openai rejected the request: Nope: bad thing"
    assert v.retry_after_s is None
    assert v.should_retry is False
    assert v.served == Served(provider="openai", model="gpt-5", attempts=1, fallback=False, reroute=False)


@pytest.mark.parametrize("code", [None, "ValidationException", "context_length_exceeded"])
def test_verdict_a_prompt_over_the_context_window_answers_openais_code(code: str | None) -> None:
    message = "Input is too long for requested model."  # Bedrock's, with no code or its own
    v = conclude(state_with(rec(1, K.CONTEXT_LENGTH, 400, message=message, code=code)), StopReason.TERMINAL)
    assert (v.status_code, v.error_code) == (400, "context_length_exceeded")


def test_verdict_terminal_without_a_message_names_the_kind() -> None:
    v = conclude(state_with(rec(1, K.CLIENT_ERROR, 404)), StopReason.TERMINAL)
    assert v.message.endswith("rejected the request: client_error")


@pytest.mark.parametrize(
    ("kind", "status", "expected"),
    [
        (K.CLIENT_ERROR, 200, 400),
        (K.AUTH, 200, 401),
        (K.CONTEXT_LENGTH, 200, 400),
        (K.CLIENT_ERROR, None, 400),
        (K.AUTH, None, 401),
    ],
    ids=["envelope-invalid-request", "envelope-auth", "envelope-context-length", "no-status", "no-status-auth"],
)
def test_verdict_terminal_error_envelope_in_a_2xx_never_answers_2xx(
    kind: FailureKind, status: int | None, expected: int
) -> None:
    v = conclude(state_with(rec(1, kind, status, message="error in body")), StopReason.TERMINAL)
    assert v.status_code == expected


def test_verdict_terminal_uses_the_last_attempt() -> None:
    v = conclude(
        state_with(rec(1, K.SERVER_ERROR, 503), rec(2, K.AUTH, 401, at=B, message="bad key")), StopReason.TERMINAL
    )
    assert v.status_code == 401
    assert "azure" in v.message
    assert v.served.fallback is True
    assert len(v.summary) == 2


# --------------------------------------------------------------------- ALL_OPEN


@pytest.mark.parametrize(
    ("reopen", "retry_after_s"),
    [([12.5, 3.2], 4), ([5.0], 5), ([0.2], 1), ([0.0], 1), ([None], 1), ([30.0, None, 29.01], 30)],
    ids=["shortest-rounded-up", "whole-seconds", "sub-second-is-1", "zero-is-1", "unknown-is-1", "ignores-unknown"],
)
def test_verdict_all_open_is_503_with_the_shortest_cooldown(reopen: list[float | None], retry_after_s: int) -> None:
    v = conclude(state_with(skips=tuple(open_skip(r) for r in reopen)), StopReason.ALL_OPEN)
    assert (v.status_code, v.error_type, v.error_code) == (503, "service_unavailable", "circuit_open")
    assert v.retry_after_s == retry_after_s
    assert v.should_retry is True
    assert "`gpt-5`" in v.message and f"{retry_after_s} s" in v.message
    assert v.summary == ()
    assert v.served == Served(provider=None, model=None, attempts=0, fallback=False, reroute=False)


def test_verdict_all_open_ignores_no_credential_skips_for_the_cooldown() -> None:
    skips = (SkipRecord(target=A.target, reason=SkipReason.NO_CREDENTIAL, reopen_in_s=1.0), open_skip(8.0, B))
    assert conclude(state_with(skips=skips), StopReason.ALL_OPEN).retry_after_s == 8


# --------------------------------------------------------------------- DEADLINE


def test_verdict_deadline_is_504_budget_exhausted_with_the_summary() -> None:
    v = conclude(
        state_with(rec(1, K.SERVER_ERROR, 503, message="busy"), rec(2, K.TIMEOUT, None, at=B)), StopReason.DEADLINE
    )
    assert (v.status_code, v.error_type, v.error_code) == (504, "timeout_error", "budget_exhausted")
    assert v.should_retry is False
    assert v.retry_after_s is None
    assert [row.attempt for row in v.summary] == [1, 2]
    assert "2 attempt(s)" in v.message and "azure/gpt-5-prod answered timeout" in v.message


def test_verdict_deadline_before_any_attempt() -> None:
    v = conclude(state_with(), StopReason.DEADLINE)
    assert v.status_code == 504
    assert v.message.endswith("for `gpt-5`.")


# --------------------------------------------------------------------- CANCELLED


def test_verdict_cancelled_is_499_for_the_records() -> None:
    v = conclude(state_with(rec(1, K.CANCELLED, None)), StopReason.CANCELLED)
    assert (v.status_code, v.error_code, v.should_retry) == (499, "client_closed_request", None)


# --------------------------------------------------------------------- EXHAUSTED


@pytest.mark.parametrize(
    ("hints", "reopen", "retry_after_s"),
    [
        ([5.0, 3.0, 7.0], [], 3),
        ([None, 2.5, None], [], 3),
        ([0.3], [], 1),
        ([None, None], [9.0, 4.5], 5),
        ([None], [], 1),
        ([60.0], [1.0], 60),
    ],
    ids=[
        "shortest-hint",
        "hint-rounded-up",
        "sub-second-hint-is-1",
        "no-hint-shortest-cooldown",
        "nothing-is-1",
        "hint-before-cooldown",
    ],
)
def test_verdict_every_failure_a_rate_limit_is_429_with_retry_after(
    hints: list[float | None], reopen: list[float], retry_after_s: int
) -> None:
    records = tuple(
        rec(i + 1, K.RATE_LIMITED, 429, message=f"slow down {i}", retry_after_s=h) for i, h in enumerate(hints)
    )
    v = conclude(state_with(*records, skips=tuple(open_skip(r, B) for r in reopen)), StopReason.EXHAUSTED)
    assert (v.status_code, v.error_type, v.error_code) == (429, "rate_limit_error", "rate_limit_exceeded")
    assert v.retry_after_s == retry_after_s
    assert v.should_retry is True
    assert f"slow down {len(hints) - 1}" in v.message  # the last provider's message


@pytest.mark.parametrize(
    "kinds",
    [
        [(K.RATE_LIMITED, 429), (K.SERVER_ERROR, 503)],
        [(K.QUOTA_EXHAUSTED, 429)],
        [(K.RATE_LIMITED, 429), (K.TRANSPORT, None)],
        [(K.SERVER_ERROR, 500), (K.SERVER_ERROR, 502)],
    ],
    ids=["rate-limit-and-503", "quota-is-not-a-rate-limit", "rate-limit-and-transport", "server-errors"],
)
def test_verdict_exhausted_otherwise_is_502_provider_failed(kinds: list[tuple[FailureKind, int | None]]) -> None:
    records = tuple(rec(i + 1, k, s, message=f"msg {i}") for i, (k, s) in enumerate(kinds))
    v = conclude(state_with(*records), StopReason.EXHAUSTED)
    assert (v.status_code, v.error_type, v.error_code) == (502, "upstream_error", "provider_failed")
    assert v.should_retry is False
    assert v.retry_after_s is None
    assert "No provider could serve `gpt-5`" in v.message
    assert (
        "the gateway made every attempt its policy and the targets' health allowed (a request sent later may succeed)"
        in v.message
    )
    last_status = kinds[-1][1] if kinds[-1][1] is not None else kinds[-1][0]
    assert f"answered {last_status}: msg {len(kinds) - 1}" in v.message
    assert len(v.summary) == len(kinds)


@pytest.mark.parametrize(
    ("kind", "status", "answer"),
    [(K.SERVER_ERROR, 503, 502), (K.RATE_LIMITED, 429, 429)],
    ids=["provider-failed", "rate-limited"],
)
def test_verdict_after_more_than_one_cycle_quotes_the_original_error(
    kind: FailureKind, status: int, answer: int
) -> None:
    first = rec(1, kind, status, message="original trouble")
    later = msgspec.structs.replace(rec(2, kind, status, at=B, message="later trouble"), cycle=2)
    v = conclude(state_with(first, later), StopReason.EXHAUSTED)
    assert v.status_code == answer
    assert "riginal: openai/gpt-5 answered" in v.message and "original trouble" in v.message
    assert "later trouble" not in v.message
    assert [s.attempt for s in v.summary] == [1, 2]  # the later attempts stay in error.attempts


def test_verdict_exhausted_without_any_attempt_says_no_credential() -> None:
    skips = (SkipRecord(target=A.target, reason=SkipReason.NO_CREDENTIAL),)
    v = conclude(state_with(skips=skips), StopReason.EXHAUSTED)
    assert (v.status_code, v.error_code) == (502, "provider_failed")
    assert "No target had a usable credential" in v.message
    assert "sent later may succeed" not in v.message and v.should_retry is False


def test_verdict_exhausted_without_any_attempt_and_an_unsupported_skip_is_a_400_naming_the_field() -> None:
    unsupported = SkipRecord(
        target=A.target, reason=SkipReason.UNSUPPORTED, detail="`n` greater than 1 is not supported.", param="n"
    )
    no_key = SkipRecord(target=B.target, reason=SkipReason.NO_CREDENTIAL)
    for skips in ((unsupported,), (no_key, unsupported)):
        v = conclude(state_with(skips=skips), StopReason.EXHAUSTED)
        assert (v.status_code, v.error_type, v.error_code, v.param) == (
            400,
            "invalid_request_error",
            "unsupported_by_providers",
            "n",
        )
        assert v.message == (
            "No provider of `gpt-5` can take this request as sent (none was called): "
            "openai: `n` greater than 1 is not supported."
        )
        assert v.should_retry is False and v.summary == () and v.served.attempts == 0
    attempted = conclude(state_with(rec(1, K.SERVER_ERROR, 500, at=B), skips=(unsupported,)), StopReason.EXHAUSTED)
    assert (attempted.status_code, attempted.error_code, attempted.param) == (502, "provider_failed", None)


def test_verdict_unsupported_by_every_offer_names_each_refusal_once_with_its_providers() -> None:
    n_refused = "`n` greater than 1 is not supported."
    skips = (
        SkipRecord(target=A.target, reason=SkipReason.UNSUPPORTED, detail=n_refused, param="n"),
        SkipRecord(
            target=B.target, reason=SkipReason.UNSUPPORTED, detail="`logprobs` is not supported.", param="logprobs"
        ),
        SkipRecord(target=R.target, reason=SkipReason.UNSUPPORTED, detail=n_refused, param="n"),
        SkipRecord(target=A.target, reason=SkipReason.UNSUPPORTED, detail=n_refused, param="n"),  # a second cycle
    )
    v = conclude(state_with(skips=skips), StopReason.EXHAUSTED)
    assert (v.status_code, v.error_code, v.param) == (400, "unsupported_by_providers", "n")  # the first one's field
    assert v.message == (
        "No provider of `gpt-5` can take this request as sent (none was called): "
        "openai, anthropic: `n` greater than 1 is not supported. azure: `logprobs` is not supported."
    )


def test_verdict_reroute_exhausted_is_the_same_502_naming_the_requested_model() -> None:
    state = msgspec.structs.replace(
        begin(plan_of(R, requested_model="gpt-5", rerouted=True), Policy(), deadline_s=10.0),
        records=(rec(1, K.SERVER_ERROR, 503, at=R),),
    )
    v = conclude(state, StopReason.EXHAUSTED)
    assert (v.status_code, v.error_code) == (502, "provider_failed")
    assert "`gpt-5`" in v.message
    assert v.served.reroute is True and v.served.provider == "anthropic"


# --------------------------------------------------------------------- summary and served facts


def test_summary_rows_name_target_status_class_and_duration() -> None:
    rows = summarize((rec(1, K.SERVER_ERROR, 503, duration_ms=120.6), rec(2, K.TRANSPORT, None, at=B, duration_ms=0.4)))
    assert rows == (
        AttemptSummary(
            attempt=1,
            provider="openai",
            model="gpt-5",
            status=503,
            kind="server_error",
            disposition="retry_then_fallback",
            duration_ms=121,
        ),
        AttemptSummary(
            attempt=2,
            provider="azure",
            model="gpt-5-prod",
            status=None,
            kind="transport",
            disposition="retry_then_fallback",
            duration_ms=0,
        ),
    )


def test_summary_rows_encode_as_plain_json() -> None:
    rows = summarize((rec(1, K.TIMEOUT, 504),))
    assert msgspec.json.decode(msgspec.json.encode(rows)) == [
        {
            "attempt": 1,
            "provider": "openai",
            "model": "gpt-5",
            "status": 504,
            "kind": "timeout",
            "disposition": "fallback_now",
            "duration_ms": 120,
        },
    ]


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        ((), Served(provider=None, model=None, attempts=0, fallback=False, reroute=False)),
        (
            (rec(1, K.SUCCESS, 200),),
            Served(provider="openai", model="gpt-5", attempts=1, fallback=False, reroute=False),
        ),
        (
            (rec(1, K.SERVER_ERROR, 503), rec(2, K.SUCCESS, 200, at=B)),
            Served(provider="azure", model="gpt-5-prod", attempts=2, fallback=True, reroute=False),
        ),
        (
            (rec(1, K.SUCCESS, 200, at=R),),
            Served(provider="anthropic", model="claude", attempts=1, fallback=False, reroute=True),
        ),
    ],
    ids=["nothing-attempted", "primary", "provider-fallback", "reroute"],
)
def test_served_facts(records: tuple[AttemptRecord, ...], expected: Served) -> None:
    assert served_facts(state_with(*records)) == expected
