"""Table tests for turnout.core.wording: error envelopes and message fallbacks (SPEC §3)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support.outcomes import (
    ANTHROPIC_CREDIT,
    OPENAI_QUOTA,
    K,
    T,
)
from turnout.core.types import FailureKind, TransportError
from turnout.core.wording import (
    envelope_status,
    kind_from_message,
    transport_kind_from_message,
)

# --- envelope_status ---------------------------------------------------------------

ENVELOPE_CASES: list[tuple[str, str | None, str | None, int]] = [
    ("openai_tokens_rate_limit", "tokens", "rate_limit_exceeded", 429),
    ("anthropic_rate_limit_error", "rate_limit_error", None, 429),
    ("plain_rate_limit", "rate_limit", None, 429),
    ("anthropic_overloaded_error", "overloaded_error", None, 529),
    ("plain_overloaded", "overloaded", None, 529),
    ("openai_server_error", "server_error", None, 500),
    ("anthropic_api_error", "api_error", None, 500),
    ("openai_insufficient_quota", "insufficient_quota", "insufficient_quota", 429),
    ("anthropic_billing_error", "billing_error", None, 402),
    ("anthropic_invalid_request_error", "invalid_request_error", None, 400),
    ("anthropic_authentication_error", "authentication_error", None, 401),
    ("anthropic_permission_error", "permission_error", None, 403),
    ("anthropic_not_found_error", "not_found_error", None, 404),
    ("anthropic_request_too_large", "request_too_large", None, 413),
    ("google_resource_exhausted_upper", "RESOURCE_EXHAUSTED", None, 429),
    ("google_unavailable", "UNAVAILABLE", None, 503),
    ("google_deadline_exceeded", "DEADLINE_EXCEEDED", None, 504),
    ("bedrock_throttling", "ThrottlingException", None, 429),
    ("azure_numeric_code", None, "429", 429),
    ("numeric_code_wins_over_type", "invalid_request_error", "503", 503),
    ("numeric_2xx_code_ignored", None, "200", 500),
    ("code_before_type", "invalid_request_error", "context_length_exceeded", 400),
    ("substring_rate_limit", "org_rate_limit_hit", None, 429),
    ("substring_unauthorized", "UnauthorizedError", None, 401),
    ("hyphenated", "rate-limit-error", None, 429),
    ("unknown", "weird_new_thing", None, 500),
    ("none_none", None, None, 500),
    ("blank", "  ", "", 500),
]


@pytest.mark.parametrize(
    ("error_type", "error_code", "expected"),
    [c[1:] for c in ENVELOPE_CASES],
    ids=[c[0] for c in ENVELOPE_CASES],
)
def test_envelope_status(error_type: str | None, error_code: str | None, expected: int) -> None:
    assert envelope_status(error_type, error_code) == expected


# --- message fallbacks ----------------------------------------------------------------

TRANSPORT_MESSAGE_CASES: list[tuple[str, str, TransportError | None]] = [
    ("econnreset", "read ECONNRESET", T.RESET),
    ("reset_by_peer", "[Errno 104] Connection reset by peer", T.RESET),
    ("socket_hang_up", "socket hang up", T.RESET),
    ("premature_close", "Premature close", T.RESET),
    ("epipe", "write EPIPE", T.RESET),
    ("broken_pipe", "[Errno 32] Broken pipe", T.RESET),
    (
        "connection_aborted",
        "('Connection aborted.', RemoteDisconnected('Remote end closed connection without response'))",
        T.RESET,
    ),
    ("eof", "EOF occurred in violation of protocol", T.RESET),
    ("server_disconnected", "Server disconnected without sending a response.", T.RESET),
    ("refused", "[Errno 111] Connection refused", T.CONNECT),
    ("econnrefused", "connect ECONNREFUSED 127.0.0.1:443", T.CONNECT),
    ("getaddrinfo", "getaddrinfo ENOTFOUND api.example.com", T.CONNECT),
    ("name_resolution", "[Errno -3] Temporary failure in name resolution", T.CONNECT),
    ("name_not_known", "[Errno -2] Name or service not known", T.CONNECT),
    ("eai_again", "getaddrinfo EAI_AGAIN api.openai.com", T.CONNECT),
    ("unreachable", "[Errno 101] Network is unreachable", T.CONNECT),
    ("all_attempts_failed", "All connection attempts failed", T.CONNECT),
    ("cert_verify", "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed", T.CONNECT),
    ("timed_out", "The read operation timed out", T.ATTEMPT_TIMEOUT),
    ("read_etimedout", "read ETIMEDOUT", T.ATTEMPT_TIMEOUT),
    ("connect_etimedout", "connect ETIMEDOUT 1.2.3.4:443", T.CONNECT),
    ("connection_timed_out", "[Errno 110] Connection timed out", T.CONNECT),
    ("connect_timeout_class", "ConnectTimeout: timed out", T.CONNECT),
    ("deadline_exceeded", "Deadline Exceeded", T.ATTEMPT_TIMEOUT),
    ("read_timeout", "ReadTimeout", T.ATTEMPT_TIMEOUT),
    ("first_token_timeout", "first-token timeout after 10s", T.FIRST_TOKEN_TIMEOUT),
    ("fetch_failed", "TypeError: fetch failed", T.CONNECT),
    ("failed_to_fetch", "TypeError: Failed to fetch", T.CONNECT),
    ("connection_error", "Connection error.", T.CONNECT),
    ("stream_error", "Stream error: stream reset by the server", T.RESET),
    ("stream_closed", "stream closed", T.RESET),
    ("http2_stream_error", "StreamError: <StreamError stream_id:3, error_code:2>", T.RESET),
    ("protocol_error", "RemoteProtocolError: protocol error", T.PROTOCOL),
    ("json_decode", "JSONDecodeError: Expecting value: line 1 column 1 (char 0)", T.PROTOCOL),
    ("unknown", "something odd", None),
    ("empty", "", None),
    ("resets_word_is_not_reset", "limit resets at midnight", None),
    ("geofence_is_not_eof", "geofence mismatch", None),
]


@pytest.mark.parametrize(
    ("message", "expected"),
    [c[1:] for c in TRANSPORT_MESSAGE_CASES],
    ids=[c[0] for c in TRANSPORT_MESSAGE_CASES],
)
def test_transport_kind_from_message(message: str, expected: TransportError | None) -> None:
    assert transport_kind_from_message(message) is expected


KIND_MESSAGE_CASES: list[tuple[str, str, FailureKind | None]] = [
    ("overloaded", "Overloaded", K.SERVER_ERROR),
    ("capacity", "Model is at capacity, please retry", K.SERVER_ERROR),
    ("high_demand", "The system is currently experiencing high demand", K.SERVER_ERROR),
    ("rate_limit", "Rate limit exceeded", K.RATE_LIMITED),
    ("too_many_requests", "Too Many Requests", K.RATE_LIMITED),
    ("credit_balance", ANTHROPIC_CREDIT, K.QUOTA_EXHAUSTED),
    ("openai_quota", OPENAI_QUOTA, K.QUOTA_EXHAUSTED),
    ("spend_limit", "You have hit your spend limit", K.QUOTA_EXHAUSTED),
    ("usage_limit", "5-hour usage limit reached", K.QUOTA_EXHAUSTED),
    ("insufficient_credits", "Insufficient credits", K.QUOTA_EXHAUSTED),
    ("socket_hang_up", "socket hang up", K.TRANSPORT),
    ("refused", "Connection refused", K.TRANSPORT),
    ("timed_out", "timed out", K.TIMEOUT),
    ("protocol", "malformed SSE frame", K.MALFORMED),
    ("unknown", "hello", None),
    ("empty", "", None),
]


@pytest.mark.parametrize(
    ("message", "expected"),
    [c[1:] for c in KIND_MESSAGE_CASES],
    ids=[c[0] for c in KIND_MESSAGE_CASES],
)
def test_kind_from_message(message: str, expected: FailureKind | None) -> None:
    assert kind_from_message(message) is expected


@pytest.mark.parametrize("junk", [None, 5, b"reset", ["reset"]], ids=repr)
def test_message_fallbacks_never_raise_on_junk(junk: object) -> None:
    assert transport_kind_from_message(junk) is None  # type: ignore[arg-type]
    assert kind_from_message(junk) is None  # type: ignore[arg-type]


@given(st.text())
def test_message_fallbacks_never_raise(message: str) -> None:
    assert transport_kind_from_message(message) is None or isinstance(
        transport_kind_from_message(message), TransportError
    )
    result = kind_from_message(message)
    assert result is None or isinstance(result, FailureKind)
