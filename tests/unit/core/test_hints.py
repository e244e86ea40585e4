"""Table tests for turnout.core.hints (SPEC §3 Backoff, RFC 9110 §10.2.3)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnout.core.hints import (
    MAX_HINT_S,
    parse_go_duration_s,
    parse_retry_after_s,
    retry_after_s,
)

# RFC 9110's example instant: Sun, 06 Nov 1994 08:49:37 GMT.
NOW = 784_111_777.0

# --- parse_go_duration_s ------------------------------------------------------------

GO_CASES: list[tuple[str, str, float | None]] = [
    ("openai_6m0s", "6m0s", 360.0),
    ("openai_20ms", "20ms", 0.02),
    ("openai_1s", "1s", 1.0),
    ("compound_h_m_s", "1h2m3.5s", 3723.5),
    ("fraction_0_5s", "0.5s", 0.5),
    ("groq_7_66s", "7.66s", 7.66),
    ("groq_2m59_56s", "2m59.56s", 179.56),
    ("fractional_hours", "1.5h", 5400.0),
    ("microseconds_us", "300us", 0.0003),
    ("microseconds_micro_sign", "2\u00b5s", 0.000002),
    ("microseconds_greek_mu", "2\u03bcs", 0.000002),
    ("nanoseconds", "100ns", 1e-7),
    ("bare_zero", "0", 0.0),
    ("plus_sign", "+5s", 5.0),
    ("leading_dot", ".5s", 0.5),
    ("surrounding_space", "  1s ", 1.0),
    ("empty", "", None),
    ("junk", "abc", None),
    ("missing_unit", "5", None),
    ("negative", "-1s", None),
    ("unknown_unit_day", "1d", None),
    ("inner_space", "1 s", None),
    ("unit_only", "s", None),
    ("double_dot", "1.2.3s", None),
    ("exponent", "1e3s", None),
    ("upper_case_unit", "5S", None),
    ("overflow", "9" * 400 + "s", None),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in GO_CASES], ids=[c[0] for c in GO_CASES])
def test_parse_go_duration_s(text: str, expected: float | None) -> None:
    result = parse_go_duration_s(text)
    if expected is None:
        assert result is None
    else:
        assert result == pytest.approx(expected)


# --- parse_retry_after_s -------------------------------------------------------------

RETRY_AFTER_CASES: list[tuple[str, str, float | None]] = [
    ("delta_seconds", "120", 120.0),
    ("delta_zero", "0", 0.0),
    ("delta_decimal", "1.5", 1.5),
    ("delta_spaces", "  30 ", 30.0),
    ("delta_large_uncapped", "100000", 100000.0),
    ("imf_fixdate_future", "Sun, 06 Nov 1994 08:51:37 GMT", 120.0),
    ("imf_fixdate_past", "Sun, 06 Nov 1994 08:48:37 GMT", 0.0),
    ("imf_fixdate_now", "Sun, 06 Nov 1994 08:49:37 GMT", 0.0),
    ("rfc850_obsolete", "Sunday, 06-Nov-94 08:51:37 GMT", 120.0),
    ("asctime_obsolete", "Sun Nov  6 08:51:37 1994", 120.0),
    ("numeric_offset", "Sun, 06 Nov 1994 09:51:37 +0100", 120.0),
    ("far_future_date_uncapped", "Fri, 31 Dec 9999 23:59:59 GMT", 253402300799.0 - NOW),
    ("empty", "", None),
    ("junk", "abc", None),
    ("negative", "-5", None),
    ("plus_sign", "+5", None),
    ("exponent_overflow", "1e309", None),
    ("inf", "inf", None),
    ("nan", "nan", None),
    ("unit_suffix", "5s", None),
    ("bad_day", "Mon, 32 Nov 1994 08:49:37 GMT", None),
    ("two_values", "120, 120", None),
]


@pytest.mark.parametrize(
    ("value", "expected"),
    [c[1:] for c in RETRY_AFTER_CASES],
    ids=[c[0] for c in RETRY_AFTER_CASES],
)
def test_parse_retry_after_s(value: str, expected: float | None) -> None:
    result = parse_retry_after_s(value, NOW)
    if expected is None:
        assert result is None
    else:
        assert result == pytest.approx(expected)


def test_parse_retry_after_s_date_with_non_finite_now_is_none() -> None:
    assert parse_retry_after_s("Sun, 06 Nov 1994 08:51:37 GMT", math.nan) is None
    assert parse_retry_after_s("Sun, 06 Nov 1994 08:51:37 GMT", math.inf) is None
    assert parse_retry_after_s("7", math.nan) == 7.0


def test_parse_retry_after_s_huge_digits_is_not_finite_so_none() -> None:
    assert parse_retry_after_s("9" * 400, NOW) is None


# --- retry_after_s ----------------------------------------------------------------------

Headers = dict[str, str]

OPENAI_BOTH = {"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s"}
ANTHROPIC_RESET_30S = "1994-11-06T08:50:07Z"
ANTHROPIC_RESET_90S = "1994-11-06T08:51:07Z"

HINT_CASES: list[tuple[str, Headers, int | None, str, float | None]] = [
    # retry-after-ms
    ("ms_integer", {"retry-after-ms": "1500"}, 429, "", 1.5),
    ("ms_decimal", {"retry-after-ms": "20.5"}, 429, "", 0.0205),
    ("ms_mixed_case_name", {"Retry-After-Ms": "250"}, 503, "", 0.25),
    ("ms_wins_over_retry_after", {"retry-after-ms": "250", "Retry-After": "10"}, 429, "", 0.25),
    ("ms_junk_falls_to_retry_after", {"retry-after-ms": "abc", "retry-after": "7"}, 429, "", 7.0),
    ("ms_negative_falls_to_retry_after", {"retry-after-ms": "-1", "retry-after": "7"}, 429, "", 7.0),
    ("ms_absurd_falls_to_retry_after", {"retry-after-ms": "86400001", "retry-after": "7"}, 429, "", 7.0),
    # Retry-After
    ("delta", {"Retry-After": "120"}, 429, "", 120.0),
    ("delta_upper_name", {"RETRY-AFTER": "3"}, 503, "", 3.0),
    ("delta_decimal", {"retry-after": "1.5"}, 429, "", 1.5),
    ("delta_zero", {"retry-after": "0"}, 429, "", 0.0),
    ("delta_one_day_kept", {"retry-after": "86400"}, 429, "", 86400.0),
    ("delta_over_one_day_ignored", {"retry-after": "86401"}, 429, "", None),
    ("delta_huge_ignored", {"retry-after": "99999999999999999999"}, 429, "", None),
    ("delta_negative_ignored", {"retry-after": "-5"}, 429, "", None),
    ("delta_junk_ignored", {"retry-after": "abc"}, 429, "", None),
    ("delta_empty_ignored", {"retry-after": ""}, 429, "", None),
    ("delta_1e309_ignored", {"retry-after": "1e309"}, 429, "", None),
    ("date_future", {"Retry-After": "Sun, 06 Nov 1994 08:51:37 GMT"}, 503, "", 120.0),
    ("date_past", {"Retry-After": "Sun, 06 Nov 1994 08:00:00 GMT"}, 503, "", 0.0),
    ("date_rfc850", {"Retry-After": "Sunday, 06-Nov-94 08:51:37 GMT"}, 503, "", 120.0),
    ("date_asctime", {"Retry-After": "Sun Nov  6 08:51:37 1994"}, 503, "", 120.0),
    ("date_too_far_ignored", {"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"}, 503, "", None),
    ("retry_after_applies_without_status", {"retry-after": "2"}, None, "", 2.0),
    ("junk_retry_after_falls_to_message", {"retry-after": "soon"}, 429, "Please try again in 20s.", 20.0),
    # OpenAI / Groq x-ratelimit-* (429 only)
    (
        "openai_tokens_exhausted_longest",
        {**OPENAI_BOTH, "x-ratelimit-remaining-requests": "99", "x-ratelimit-remaining-tokens": "0"},
        429,
        "",
        360.0,
    ),
    (
        "openai_requests_exhausted",
        {**OPENAI_BOTH, "x-ratelimit-remaining-requests": "0", "x-ratelimit-remaining-tokens": "5000"},
        429,
        "",
        1.0,
    ),
    (
        "openai_both_exhausted_takes_max",
        {**OPENAI_BOTH, "x-ratelimit-remaining-requests": "0", "x-ratelimit-remaining-tokens": "0"},
        429,
        "",
        360.0,
    ),
    (
        "openai_none_exhausted_no_hint",
        {**OPENAI_BOTH, "x-ratelimit-remaining-requests": "5", "x-ratelimit-remaining-tokens": "5"},
        429,
        "",
        None,
    ),
    ("openai_no_remaining_takes_shortest", dict(OPENAI_BOTH), 429, "", 1.0),
    (
        "openai_mixed_case_names",
        {"X-RateLimit-Reset-Tokens": "20ms", "X-RateLimit-Remaining-Tokens": "0"},
        429,
        "",
        0.02,
    ),
    ("openai_compound_duration", {"x-ratelimit-reset-tokens": "1h2m3.5s"}, 429, "", 3723.5),
    ("openai_ignored_when_not_429", {**OPENAI_BOTH, "x-ratelimit-remaining-tokens": "0"}, 500, "", None),
    (
        "openai_junk_reset_ignored",
        {"x-ratelimit-reset-tokens": "abc", "x-ratelimit-remaining-tokens": "0"},
        429,
        "",
        None,
    ),
    (
        "openai_junk_reset_falls_to_message",
        {"x-ratelimit-reset-tokens": "abc", "x-ratelimit-remaining-tokens": "0"},
        429,
        "Please try again in 6s.",
        6.0,
    ),
    (
        "groq_headers",
        {
            "x-ratelimit-reset-requests": "2m59.56s",
            "x-ratelimit-reset-tokens": "7.66s",
            "x-ratelimit-remaining-requests": "14370",
            "x-ratelimit-remaining-tokens": "0",
        },
        429,
        "",
        7.66,
    ),
    ("retry_after_beats_x_ratelimit", {**OPENAI_BOTH, "retry-after": "2"}, 429, "", 2.0),
    (
        "azure_remaining_without_reset_falls_to_message",
        {"x-ratelimit-remaining-requests": "7", "x-ratelimit-remaining-tokens": "1014"},
        429,
        "Rate limit is exceeded. Try again in 2 seconds.",
        2.0,
    ),
    # Anthropic anthropic-ratelimit-* (429 only)
    (
        "anthropic_tokens_exhausted",
        {
            "anthropic-ratelimit-tokens-reset": ANTHROPIC_RESET_30S,
            "anthropic-ratelimit-tokens-remaining": "0",
            "anthropic-ratelimit-requests-reset": ANTHROPIC_RESET_90S,
            "anthropic-ratelimit-requests-remaining": "40",
        },
        429,
        "",
        30.0,
    ),
    (
        "anthropic_input_tokens_bucket",
        {
            "anthropic-ratelimit-input-tokens-reset": ANTHROPIC_RESET_90S,
            "anthropic-ratelimit-input-tokens-remaining": "0",
        },
        429,
        "",
        90.0,
    ),
    (
        "anthropic_output_tokens_bucket",
        {
            "anthropic-ratelimit-output-tokens-reset": ANTHROPIC_RESET_30S,
            "anthropic-ratelimit-output-tokens-remaining": "0",
        },
        429,
        "",
        30.0,
    ),
    (
        "anthropic_two_exhausted_takes_max",
        {
            "anthropic-ratelimit-tokens-reset": ANTHROPIC_RESET_30S,
            "anthropic-ratelimit-tokens-remaining": "0",
            "anthropic-ratelimit-requests-reset": ANTHROPIC_RESET_90S,
            "anthropic-ratelimit-requests-remaining": "0",
        },
        429,
        "",
        90.0,
    ),
    (
        "anthropic_no_remaining_takes_shortest",
        {
            "anthropic-ratelimit-tokens-reset": ANTHROPIC_RESET_30S,
            "anthropic-ratelimit-requests-reset": ANTHROPIC_RESET_90S,
        },
        429,
        "",
        30.0,
    ),
    (
        "anthropic_offset_timestamp",
        {"anthropic-ratelimit-tokens-reset": "1994-11-06T09:50:07+01:00", "anthropic-ratelimit-tokens-remaining": "0"},
        429,
        "",
        30.0,
    ),
    (
        "anthropic_fractional_timestamp",
        {"anthropic-ratelimit-tokens-reset": "1994-11-06T08:50:07.500Z", "anthropic-ratelimit-tokens-remaining": "0"},
        429,
        "",
        30.5,
    ),
    (
        "anthropic_past_reset_is_zero",
        {"anthropic-ratelimit-tokens-reset": "1994-11-06T08:00:00Z", "anthropic-ratelimit-tokens-remaining": "0"},
        429,
        "",
        0.0,
    ),
    (
        "anthropic_junk_reset_ignored",
        {"anthropic-ratelimit-tokens-reset": "tomorrow", "anthropic-ratelimit-tokens-remaining": "0"},
        429,
        "",
        None,
    ),
    (
        "anthropic_far_reset_ignored",
        {"anthropic-ratelimit-tokens-reset": "1994-11-09T08:49:37Z", "anthropic-ratelimit-tokens-remaining": "0"},
        429,
        "",
        None,
    ),
    (
        "anthropic_ignored_when_not_429",
        {"anthropic-ratelimit-tokens-reset": ANTHROPIC_RESET_30S, "anthropic-ratelimit-tokens-remaining": "0"},
        529,
        "",
        None,
    ),
    (
        "anthropic_retry_after_wins",
        {
            "retry-after": "4",
            "anthropic-ratelimit-tokens-reset": ANTHROPIC_RESET_30S,
            "anthropic-ratelimit-tokens-remaining": "0",
        },
        429,
        "",
        4.0,
    ),
    # message wording
    (
        "msg_openai_try_again_20s",
        {},
        429,
        "Rate limit reached for gpt-4o. Please try again in 20s. Visit https://platform.openai.com",
        20.0,
    ),
    ("msg_openai_try_again_ms", {}, 429, "Please try again in 828ms.", 0.828),
    ("msg_try_again_1_5_seconds", {}, 429, "try again in 1.5 seconds", 1.5),
    ("msg_retry_after_300ms", {}, 429, "retry after 300ms", 0.3),
    ("msg_gemini_retry_in_7_2s", {}, 429, "Quota exceeded for metric. Please retry in 7.2s.", 7.2),
    (
        "msg_azure_retry_after_seconds",
        {},
        429,
        "Please retry after 7 seconds. Please go here: https://aka.ms/oai/quotaincrease",
        7.0,
    ),
    ("msg_azure_one_day", {}, 429, "Please retry after 86400 seconds.", 86400.0),
    (
        "msg_groq_go_duration",
        {},
        429,
        "Please try again in 1m0.363142857s. Visit https://console.groq.com/docs/rate-limits",
        60.363142857,
    ),
    ("msg_upper_case", {}, 429, "TRY AGAIN IN 2 SECONDS", 2.0),
    ("msg_minutes", {}, 429, "try again in 5 minutes", 300.0),
    (
        "msg_google_retry_delay_json",
        {},
        429,
        '{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "38s"}',
        38.0,
    ),
    ("msg_without_status", {}, None, "Please try again in 3s", 3.0),
    ("msg_later_has_no_hint", {}, 429, "Please try again later.", None),
    ("msg_days_too_long", {}, 429, "try again in 3 days", None),
    ("msg_no_unit", {}, 429, "try again in 5", None),
    ("msg_first_sane_wins", {}, 429, "try again in 3 days or retry after 10s", 10.0),
    ("msg_empty", {}, 429, "", None),
    ("nothing_at_all", {}, None, "", None),
]


@pytest.mark.parametrize(
    ("headers", "status", "message", "expected"),
    [c[1:] for c in HINT_CASES],
    ids=[c[0] for c in HINT_CASES],
)
def test_retry_after_s(headers: Headers, status: int | None, message: str, expected: float | None) -> None:
    result = retry_after_s(headers, status=status, message=message, now_epoch_s=NOW)
    if expected is None:
        assert result is None
    else:
        assert result == pytest.approx(expected)


def test_hint_case_ids_are_unique() -> None:
    ids = [c[0] for c in HINT_CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(
    "headers",
    [None, 5, "retry-after: 5", {1: "5"}, {"retry-after": 5}, {"retry-after": None}],
    ids=["none", "int", "str", "int_key", "int_value", "none_value"],
)
def test_retry_after_s_junk_headers_never_raise(headers: object) -> None:
    assert (
        retry_after_s(headers, status=429, message="", now_epoch_s=NOW)  # type: ignore[arg-type]
        is None
    )


def test_retry_after_s_accepts_bytes_headers() -> None:
    headers = {b"Retry-After": b"5"}
    assert retry_after_s(headers, status=429, message="", now_epoch_s=NOW) == 5.0  # type: ignore[arg-type]


def test_retry_after_s_junk_message_never_raises() -> None:
    assert retry_after_s({}, status=429, message=None, now_epoch_s=NOW) is None  # type: ignore[arg-type]


def test_retry_after_s_negative_zero_is_plain_zero() -> None:
    result = retry_after_s({"retry-after": "0.0"}, status=429, message="", now_epoch_s=NOW)
    assert result is not None
    assert result == 0.0
    assert math.copysign(1.0, result) == 1.0


# --- properties -------------------------------------------------------------------------

HEADER_NAMES = [
    "retry-after-ms",
    "Retry-After",
    "retry-after",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-remaining-tokens",
    "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-tokens-reset",
    "anthropic-ratelimit-input-tokens-reset",
    "anthropic-ratelimit-output-tokens-reset",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-tokens-remaining",
]
HEADER_VALUES = [
    "0",
    "1",
    "-5",
    "1e309",
    "abc",
    "",
    "86401",
    "1.5",
    "6m0s",
    "20ms",
    "1h2m3.5s",
    "Sun, 06 Nov 1994 08:51:37 GMT",
    "Sunday, 06-Nov-94 08:51:37 GMT",
    "Sun Nov  6 08:51:37 1994",
    "1994-11-06T08:50:07Z",
    "9999-12-31T23:59:59Z",
    "0001-01-01T00:00:00+14:00",
    "Fri, 31 Dec 9999 23:59:59 GMT",
    "nan",
    "inf",
]
header_dicts = st.dictionaries(
    st.one_of(st.sampled_from(HEADER_NAMES), st.text(max_size=30)),
    st.one_of(st.sampled_from(HEADER_VALUES), st.text(max_size=40)),
    max_size=8,
)
messages = st.one_of(
    st.text(max_size=200),
    st.builds(
        "{} {}{}".format,
        st.sampled_from(["try again in", "retry after", "Please retry in", 'retryDelay": "']),
        st.one_of(st.integers(), st.floats(allow_nan=True, allow_infinity=True)).map(str),
        st.sampled_from(["s", "ms", " seconds", "m0s", "h", " days", "", "µs"]),
    ),
)
nows = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=0, max_value=4e9),
    st.just(NOW),
)


@given(
    header_dicts,
    st.one_of(st.none(), st.just(429), st.integers()),
    messages,
    nows,
)
def test_retry_after_s_is_none_or_within_one_day(
    headers: Headers, status: int | None, message: str, now: float
) -> None:
    result = retry_after_s(headers, status=status, message=message, now_epoch_s=now)
    assert result is None or (isinstance(result, float) and 0.0 <= result <= MAX_HINT_S)


@given(st.text(max_size=60))
def test_parse_go_duration_s_never_raises(text: str) -> None:
    result = parse_go_duration_s(text)
    assert result is None or (math.isfinite(result) and result >= 0.0)


@given(st.one_of(st.text(max_size=60), st.sampled_from(HEADER_VALUES)), nows)
def test_parse_retry_after_s_never_raises(value: str, now: float) -> None:
    result = parse_retry_after_s(value, now)
    assert result is None or (math.isfinite(result) and result >= 0.0)
