"""Table tests for turnout.core.status_lists: the status a policy's lists match (SPEC §3 / §4)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support.outcomes import (
    ANTHROPIC_CREDIT,
    K,
    Purpose,
    T,
    o,
    outcomes,
)
from turnout.core.classify import classify, disposition
from turnout.core.status_lists import status_for_lists, status_matches, status_set
from turnout.core.types import Disposition, FailureKind, Outcome

# --- status_for_lists ----------------------------------------------------------------


LIST_STATUS_CASES: list[tuple[str, Outcome, Purpose, int | None]] = [
    ("http_503_retry", o(503), "retry", 503),
    ("http_503_fallback", o(503), "fallback", 503),
    ("http_429", o(429), "retry", 429),
    ("http_408", o(408), "fallback", 408),
    ("http_400", o(400), "fallback", 400),
    ("transport_connect_retry", o(transport=T.CONNECT), "retry", 503),
    ("transport_connect_fallback", o(transport=T.CONNECT), "fallback", 502),
    ("transport_reset_retry", o(transport=T.RESET), "retry", 503),
    ("transport_reset_fallback", o(transport=T.RESET), "fallback", 502),
    ("attempt_timeout_retry", o(transport=T.ATTEMPT_TIMEOUT), "retry", 504),
    ("attempt_timeout_fallback", o(transport=T.ATTEMPT_TIMEOUT), "fallback", 504),
    ("first_token_timeout", o(transport=T.FIRST_TOKEN_TIMEOUT), "fallback", 504),
    ("protocol_malformed", o(transport=T.PROTOCOL), "fallback", 502),
    ("body_rate_limit_as_429", o(200, type="rate_limit_error", in_body=True), "retry", 429),
    ("body_overloaded_as_529", o(200, type="overloaded_error", in_body=True), "retry", 529),
    ("body_api_error_as_500", o(200, type="api_error", in_body=True), "retry", 500),
    ("body_unknown_as_500", o(200, type="mystery", in_body=True), "fallback", 500),
    ("stream_no_status_overloaded", o(None, type="overloaded_error", in_body=True), "retry", 529),
    ("http_200_reset_mid_body", o(200, transport=T.RESET), "fallback", 502),
    ("http_302_malformed", o(302), "fallback", 502),
    ("message_overloaded_no_status", o(msg="Overloaded"), "retry", 503),
    ("message_quota_no_status", o(msg=ANTHROPIC_CREDIT), "fallback", None),
    ("success_keeps_status", o(200), "retry", 200),
]


@pytest.mark.parametrize(
    ("outcome", "purpose", "expected"),
    [c[1:] for c in LIST_STATUS_CASES],
    ids=[c[0] for c in LIST_STATUS_CASES],
)
def test_status_for_lists(outcome: Outcome, purpose: Purpose, expected: int | None) -> None:
    assert status_for_lists(outcome, classify(outcome), purpose=purpose) == expected


WORDING_LIST_CASES: list[tuple[str, Outcome, Purpose, int | None]] = [
    ("403_rate_limit_retry", o(403, msg="Rate limit exceeded for this key"), "retry", 429),
    ("403_rate_limit_fallback", o(403, msg="Rate limit exceeded for this key"), "fallback", 429),
    ("403_too_many_requests", o(403, msg="Too Many Requests"), "retry", 429),
    ("403_overloaded", o(403, msg="The server is currently overloaded"), "retry", 429),
    ("403_throttled", o(403, msg="Request was throttled"), "fallback", 429),
    ("403_capacity", o(403, msg="Insufficient capacity for this model"), "retry", 429),
    ("google_403_user_rate_limit", o(403, code="userRateLimitExceeded", msg="User Rate Limit Exceeded"), "retry", 429),
    ("403_permission_keeps_403", o(403, type="permission_error", msg="no permission"), "fallback", 403),
    ("403_spend_limit_keeps_403", o(403, msg="Monthly spend limit reached for this project"), "fallback", 403),
    ("400_context_keeps_400", o(400, code="context_length_exceeded"), "fallback", 400),
    ("503_keeps_503", o(503, msg="rate limit"), "retry", 503),
    ("529_keeps_529", o(529), "retry", 529),
]


@pytest.mark.parametrize(
    ("outcome", "purpose", "expected"),
    [c[1:] for c in WORDING_LIST_CASES],
    ids=[c[0] for c in WORDING_LIST_CASES],
)
def test_status_for_lists_matches_a_class_decided_by_wording_as_its_status(
    outcome: Outcome, purpose: Purpose, expected: int | None
) -> None:
    """Issue: a 403 speaking of a rate limit is RATE_LIMITED, so the lists
    must see 429, not the raw 403 (else no retry, no fallback)."""
    assert status_for_lists(outcome, classify(outcome), purpose=purpose) == expected


@pytest.mark.parametrize(
    "kind",
    [K.NO_CREDENTIAL, K.CANCELLED, K.AUTH, K.CLIENT_ERROR, K.QUOTA_EXHAUSTED],
    ids=lambda k: k.value,
)
def test_status_for_lists_class_decided_kinds_without_status_are_none(kind: FailureKind) -> None:
    assert status_for_lists(o(), kind, purpose="retry") is None
    assert status_for_lists(o(), kind, purpose="fallback") is None


def test_default_policy_lists_retry_transport_and_fail_over() -> None:
    # SPEC §4 defaults: transport failures are retried (503) and fail over (5xx).
    outcome = o(transport=T.RESET)
    kind = classify(outcome)
    retry_on = [429, 500, 502, 503, 529]
    on_status: list[int | str] = [408, 429, "5xx"]
    assert status_matches(status_for_lists(outcome, kind, purpose="retry"), retry_on)
    assert status_matches(status_for_lists(outcome, kind, purpose="fallback"), on_status)


# --- status_matches -----------------------------------------------------------------

MATCH_CASES: list[tuple[str, int | None, list[int | str], bool]] = [
    ("exact_int", 503, [429, 503], True),
    ("exact_int_miss", 504, [429, 503], False),
    ("class_5xx", 504, ["5xx"], True),
    ("class_upper", 504, ["5XX"], True),
    ("class_spaces", 404, [" 4xx "], True),
    ("class_miss", 404, ["5xx"], False),
    ("class_4xx_on_429", 429, [408, "4xx"], True),
    ("numeric_string", 429, ["429"], True),
    ("numeric_string_miss", 429, ["430"], False),
    ("none_never_matches", None, [429, "5xx", "4xx"], False),
    ("empty_list", 500, [], False),
    ("junk_entries", 500, ["abc", "5x", "xx", "", "5xxx", "6xx", "0xx"], False),
    ("bool_entry_junk", 1, [True], False),
    ("float_entry_junk", 500, [500.0], False),  # type: ignore[list-item]
    ("none_entry_junk", 500, [None], False),  # type: ignore[list-item]
    ("junk_then_match", 502, ["junk", None, "5xx"], True),  # type: ignore[list-item]
    ("class_on_out_of_range", 600, ["6xx", "5xx"], False),
    ("class_1xx", 101, ["1xx"], True),
]


@pytest.mark.parametrize(
    ("status", "entries", "expected"),
    [c[1:] for c in MATCH_CASES],
    ids=[c[0] for c in MATCH_CASES],
)
def test_status_matches(status: int | None, entries: list[int | str], expected: bool) -> None:
    assert status_matches(status, entries) is expected


def test_status_matches_junk_list_and_status_never_raise() -> None:
    assert status_matches(500, None) is False  # type: ignore[arg-type]
    assert status_matches(500, 5) is False  # type: ignore[arg-type]
    assert status_matches(500, "5xx") is True
    assert status_matches(True, [1]) is False
    assert status_matches("500", [500]) is False  # type: ignore[arg-type]


@given(outcomes, st.sampled_from(FailureKind), st.sampled_from(["retry", "fallback"]))
def test_status_for_lists_never_raises(outcome: Outcome, kind: FailureKind, purpose: Purpose) -> None:
    status = status_for_lists(outcome, kind, purpose=purpose)
    assert status is None or isinstance(status, int)


@given(outcomes, st.sampled_from(["retry", "fallback"]))
def test_failed_outcomes_of_list_decided_kinds_have_a_status(outcome: Outcome, purpose: Purpose) -> None:
    kind = classify(outcome)
    if disposition(kind) in {Disposition.RETRY_THEN_FALLBACK} or kind in {
        K.TIMEOUT,
        K.MALFORMED,
        K.OTHER_5XX,
    }:
        assert status_for_lists(outcome, kind, purpose=purpose) is not None


@given(
    st.one_of(st.none(), st.integers(), st.booleans()),
    st.lists(st.one_of(st.integers(), st.text(max_size=6), st.none(), st.floats(), st.booleans())),
)
def test_status_matches_never_raises(status: int | None, entries: list[int | str]) -> None:
    assert isinstance(status_matches(status, entries), bool)


def test_a_status_list_is_parsed_once_and_matches_codes_and_classes() -> None:
    parsed = status_set((429, "5xx", " 408 ", True, 1.5, "5x", None))
    assert parsed is status_set((429, "5xx", " 408 ", True, 1.5, "5x", None))  # the same list is not parsed again
    assert (sorted(parsed.codes), sorted(parsed.classes)) == ([408, 429], [5])
    assert [s in parsed for s in (408, 429, 500, 599, 600, 404, True)] == [True, True, True, True, False, False, False]
    assert status_set("5xx") == status_set(("5xx",)) and status_set(7) == status_set(())  # a junk list is empty
    assert status_set([{"unhashable": 1}, 503]).codes == frozenset({503})


def test_a_junk_entry_equal_to_a_cached_code_is_still_junk() -> None:
    """`500.0 == 500` and `True == 1` as cache keys: a list parsed before must not stand in for them."""
    assert status_matches(500, [500]) and status_set((1,)).codes == frozenset({1})
    assert not status_matches(500, [500.0])  # type: ignore[list-item]
    assert status_set((True,)).codes == frozenset()
