"""Table tests for turnout.core.classify (SPEC §3 default classification)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support.outcomes import (
    ANTHROPIC_429,
    ANTHROPIC_CREDIT,
    ANTHROPIC_USAGE,
    AZURE_FILTER,
    AZURE_TPM,
    GROQ_413,
    GROQ_TPM,
    OPENAI_CONTEXT,
    OPENAI_QUOTA,
    OPENAI_TPM,
    K,
    T,
    o,
    optional_texts,
    outcomes,
    texts,
)
from turnout.core.classify import (
    COUNTS_AGAINST_HEALTH,
    DISPOSITION,
    classify,
    counts_against_health,
    disposition,
    status_for_lists,
    status_matches,
)
from turnout.core.types import Disposition, FailureKind, Outcome, TransportError

CLASSIFY_CASES: list[tuple[str, Outcome, FailureKind]] = [
    # --- 2xx ---------------------------------------------------------------
    ("2xx_200_ok", o(200), K.SUCCESS),
    ("2xx_201_ok", o(201), K.SUCCESS),
    ("2xx_204_ok", o(204), K.SUCCESS),
    ("2xx_200_reset_mid_body", o(200, transport=T.RESET), K.TRANSPORT),
    ("2xx_200_broken_sse", o(200, transport=T.PROTOCOL), K.MALFORMED),
    ("2xx_200_first_token_timeout", o(200, transport=T.FIRST_TOKEN_TIMEOUT), K.TIMEOUT),
    # --- error envelope inside a 2xx body or stream -------------------------
    (
        "body_openai_server_error",
        o(200, type="server_error", msg="The server had an error", in_body=True),
        K.SERVER_ERROR,
    ),
    (
        "body_openai_rate_limit_exceeded",
        o(200, type="tokens", code="rate_limit_exceeded", msg=OPENAI_TPM, in_body=True),
        K.RATE_LIMITED,
    ),
    (
        "body_openai_insufficient_quota",
        o(200, type="insufficient_quota", code="insufficient_quota", msg=OPENAI_QUOTA, in_body=True),
        K.QUOTA_EXHAUSTED,
    ),
    (
        "body_openai_context_length",
        o(200, type="invalid_request_error", code="context_length_exceeded", msg=OPENAI_CONTEXT, in_body=True),
        K.CONTEXT_LENGTH,
    ),
    ("body_openai_content_filter", o(200, code="content_filter", msg=AZURE_FILTER, in_body=True), K.CONTENT_POLICY),
    (
        "body_openai_invalid_request",
        o(200, type="invalid_request_error", msg="Invalid 'tools[0].name'", in_body=True),
        K.CLIENT_ERROR,
    ),
    ("body_anthropic_overloaded", o(200, type="overloaded_error", msg="Overloaded", in_body=True), K.SERVER_ERROR),
    ("body_anthropic_api_error", o(200, type="api_error", msg="Internal server error", in_body=True), K.SERVER_ERROR),
    (
        "body_anthropic_rate_limit_error",
        o(200, type="rate_limit_error", msg=ANTHROPIC_429, in_body=True),
        K.RATE_LIMITED,
    ),
    (
        "body_anthropic_prompt_too_long",
        o(200, type="invalid_request_error", msg="prompt is too long: 208656 tokens > 200000 maximum", in_body=True),
        K.CONTEXT_LENGTH,
    ),
    (
        "body_anthropic_authentication_error",
        o(200, type="authentication_error", msg="invalid x-api-key", in_body=True),
        K.AUTH,
    ),
    (
        "body_anthropic_permission_error",
        o(
            200,
            type="permission_error",
            msg="Your API key does not have permission to use the specified resource.",
            in_body=True,
        ),
        K.AUTH,
    ),
    (
        "body_anthropic_not_found_error",
        o(200, type="not_found_error", msg="model: claude-9", in_body=True),
        K.CLIENT_ERROR,
    ),
    (
        "body_anthropic_billing_error",
        o(200, type="billing_error", msg="Billing issue", in_body=True),
        K.QUOTA_EXHAUSTED,
    ),
    (
        "body_anthropic_request_too_large",
        o(200, type="request_too_large", msg="Request exceeds the maximum allowed number of bytes.", in_body=True),
        K.CLIENT_ERROR,
    ),
    (
        "body_google_resource_exhausted",
        o(200, type="RESOURCE_EXHAUSTED", msg="Resource has been exhausted (e.g. check quota).", in_body=True),
        K.RATE_LIMITED,
    ),
    (
        "body_azure_numeric_code_429",
        o(200, code="429", msg="Rate limit is exceeded. Try again in 2 seconds.", in_body=True),
        K.RATE_LIMITED,
    ),
    ("body_unknown_type", o(200, type="something_new", msg="???", in_body=True), K.SERVER_ERROR),
    ("body_no_type_no_code", o(200, in_body=True), K.SERVER_ERROR),
    (
        "body_stream_no_status_overloaded",
        o(None, type="overloaded_error", msg="Overloaded", in_body=True),
        K.SERVER_ERROR,
    ),
    # --- transport, no status ----------------------------------------------
    ("transport_connect", o(transport=T.CONNECT), K.TRANSPORT),
    ("transport_reset", o(transport=T.RESET), K.TRANSPORT),
    ("transport_attempt_timeout", o(transport=T.ATTEMPT_TIMEOUT), K.TIMEOUT),
    ("transport_first_token_timeout", o(transport=T.FIRST_TOKEN_TIMEOUT), K.TIMEOUT),
    ("transport_protocol", o(transport=T.PROTOCOL), K.MALFORMED),
    # --- no status, no transport: wording only --------------------------------
    ("none_empty", o(), K.MALFORMED),
    ("none_junk_message", o(msg="something odd happened"), K.MALFORMED),
    ("none_overloaded_wording", o(msg="Upstream overloaded, try later"), K.SERVER_ERROR),
    ("none_capacity_wording", o(msg="We're currently experiencing capacity issues"), K.SERVER_ERROR),
    ("none_credit_wording", o(msg=ANTHROPIC_CREDIT), K.QUOTA_EXHAUSTED),
    ("none_quota_type", o(type="insufficient_quota"), K.QUOTA_EXHAUSTED),
    ("none_socket_hang_up", o(msg="socket hang up"), K.TRANSPORT),
    ("none_read_timed_out", o(msg="The read operation timed out"), K.TIMEOUT),
    # --- quota before rate limit, any status --------------------------------
    (
        "openai_429_insufficient_quota",
        o(429, type="insufficient_quota", code="insufficient_quota", msg=OPENAI_QUOTA),
        K.QUOTA_EXHAUSTED,
    ),
    ("openai_429_insufficient_quota_null_code", o(429, type="insufficient_quota", msg=OPENAI_QUOTA), K.QUOTA_EXHAUSTED),
    (
        "openai_429_billing_hard_limit",
        o(429, type="insufficient_quota", code="billing_hard_limit_reached", msg="Billing hard limit has been reached"),
        K.QUOTA_EXHAUSTED,
    ),
    (
        "openai_429_billing_not_active",
        o(
            429,
            code="billing_not_active",
            msg="Your account is not active, please check your billing details on our website.",
        ),
        K.QUOTA_EXHAUSTED,
    ),
    ("anthropic_400_credit_balance", o(400, type="invalid_request_error", msg=ANTHROPIC_CREDIT), K.QUOTA_EXHAUSTED),
    ("anthropic_400_usage_limits", o(400, type="invalid_request_error", msg=ANTHROPIC_USAGE), K.QUOTA_EXHAUSTED),
    ("anthropic_402_billing_error", o(402, type="billing_error", msg="Billing error"), K.QUOTA_EXHAUSTED),
    ("google_429_exceeded_current_quota", o(429, type="RESOURCE_EXHAUSTED", msg=OPENAI_QUOTA), K.QUOTA_EXHAUSTED),
    (
        "bedrock_400_service_quota",
        o(400, type="ServiceQuotaExceededException", msg="Your request exceeds the service quota for your account."),
        K.QUOTA_EXHAUSTED,
    ),
    (
        "openrouter_402_insufficient_credits",
        o(402, msg="Insufficient credits. Add more using https://openrouter.ai/credits"),
        K.QUOTA_EXHAUSTED,
    ),
    ("deepseek_402_insufficient_balance", o(402, msg="Insufficient Balance"), K.QUOTA_EXHAUSTED),
    ("generic_403_spend_limit", o(403, msg="Monthly spend limit reached for this project"), K.QUOTA_EXHAUSTED),
    ("generic_500_quota_exceeded", o(500, msg="Quota exceeded for this account"), K.QUOTA_EXHAUSTED),
    ("generic_503_quota_exhausted", o(503, msg="Your quota has been exhausted"), K.QUOTA_EXHAUSTED),
    # --- 429 and 403 --------------------------------------------------------
    ("openai_429_tpm", o(429, type="tokens", code="rate_limit_exceeded", msg=OPENAI_TPM), K.RATE_LIMITED),
    ("anthropic_429_rate_limit_error", o(429, type="rate_limit_error", msg=ANTHROPIC_429), K.RATE_LIMITED),
    (
        "anthropic_429_extra_usage",
        o(429, type="rate_limit_error", msg="Extra usage is required for long context requests."),
        K.RATE_LIMITED,
    ),
    ("azure_429_token_rate_limit", o(429, code="429", msg=AZURE_TPM), K.RATE_LIMITED),
    ("groq_429_tpm_billing_link", o(429, type="tokens", code="rate_limit_exceeded", msg=GROQ_TPM), K.RATE_LIMITED),
    (
        "google_429_resource_exhausted",
        o(429, type="RESOURCE_EXHAUSTED", msg="Resource has been exhausted (e.g. check quota)."),
        K.RATE_LIMITED,
    ),
    ("mistral_429", o(429, msg="Requests rate limit exceeded"), K.RATE_LIMITED),
    (
        "bedrock_429_throttling",
        o(429, type="ThrottlingException", msg="Too many requests, please wait before trying again."),
        K.RATE_LIMITED,
    ),
    ("plain_429_empty", o(429), K.RATE_LIMITED),
    ("generic_403_rate_limit", o(403, msg="Rate limit exceeded for this key"), K.RATE_LIMITED),
    (
        "google_403_user_rate_limit",
        o(403, code="userRateLimitExceeded", msg="User Rate Limit Exceeded"),
        K.RATE_LIMITED,
    ),
    ("generic_403_too_many_requests", o(403, msg="Too Many Requests"), K.RATE_LIMITED),
    ("generic_403_overloaded", o(403, msg="The server is currently overloaded"), K.RATE_LIMITED),
    ("generic_403_throttled", o(403, msg="Request was throttled"), K.RATE_LIMITED),
    ("generic_403_capacity", o(403, msg="Insufficient capacity for this model"), K.RATE_LIMITED),
    (
        "anthropic_403_permission_error",
        o(403, type="permission_error", msg="Your API key does not have permission to use the specified resource."),
        K.AUTH,
    ),
    (
        "openai_403_unsupported_country",
        o(403, code="unsupported_country_region_territory", msg="Country, region, or territory not supported"),
        K.AUTH,
    ),
    (
        "bedrock_403_access_denied",
        o(403, type="AccessDeniedException", msg="You don't have access to the model with the specified model ID."),
        K.AUTH,
    ),
    (
        "google_403_permission_denied",
        o(403, type="PERMISSION_DENIED", msg="Method doesn't allow unregistered callers"),
        K.AUTH,
    ),
    (
        "xai_403_usage_guidelines",
        o(403, msg="Content violates usage guidelines. Team: x, API key ID: y"),
        K.CONTENT_POLICY,
    ),
    ("plain_403_empty", o(403), K.AUTH),
    # --- 401 ------------------------------------------------------------------
    (
        "openai_401_invalid_api_key",
        o(401, type="invalid_request_error", code="invalid_api_key", msg="Incorrect API key provided: sk-abc."),
        K.AUTH,
    ),
    ("anthropic_401_authentication_error", o(401, type="authentication_error", msg="invalid x-api-key"), K.AUTH),
    ("plain_401_empty", o(401), K.AUTH),
    # --- 5xx ------------------------------------------------------------------
    (
        "openai_500_server_error",
        o(500, type="server_error", msg="The server had an error while processing your request. Sorry about that!"),
        K.SERVER_ERROR,
    ),
    ("anthropic_500_api_error", o(500, type="api_error", msg="Internal server error"), K.SERVER_ERROR),
    ("plain_502", o(502, msg="Bad gateway."), K.SERVER_ERROR),
    (
        "openai_503_engine_overloaded",
        o(503, msg="The engine is currently overloaded, please try again later"),
        K.SERVER_ERROR,
    ),
    (
        "google_503_unavailable",
        o(503, type="UNAVAILABLE", msg="The model is overloaded. Please try again later."),
        K.SERVER_ERROR,
    ),
    ("anthropic_529_overloaded", o(529, type="overloaded_error", msg="Overloaded"), K.SERVER_ERROR),
    ("plain_501", o(501), K.OTHER_5XX),
    ("plain_505", o(505), K.OTHER_5XX),
    ("plain_507", o(507), K.OTHER_5XX),
    ("cloudflare_520", o(520), K.OTHER_5XX),
    ("cloudflare_524", o(524), K.OTHER_5XX),
    ("plain_599", o(599), K.OTHER_5XX),
    # --- timeouts ---------------------------------------------------------------
    ("plain_408", o(408), K.TIMEOUT),
    ("plain_504", o(504, msg="Gateway Timeout"), K.TIMEOUT),
    # --- 400 context length ---------------------------------------------------
    (
        "openai_400_context_length",
        o(400, type="invalid_request_error", code="context_length_exceeded", msg=OPENAI_CONTEXT),
        K.CONTEXT_LENGTH,
    ),
    ("openai_400_context_code_only", o(400, code="context_length_exceeded"), K.CONTEXT_LENGTH),
    (
        "azure_400_context_128k",
        o(
            400,
            code="context_length_exceeded",
            msg="This model's maximum context length is 128000 tokens. However, your messages resulted in 140004 tokens.",
        ),
        K.CONTEXT_LENGTH,
    ),
    (
        "anthropic_400_prompt_too_long",
        o(400, type="invalid_request_error", msg="prompt is too long: 209353 tokens > 199999 maximum"),
        K.CONTEXT_LENGTH,
    ),
    (
        "anthropic_400_exceed_context_limit",
        o(
            400,
            type="invalid_request_error",
            msg="input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000, decrease input length or `max_tokens` and try again",
        ),
        K.CONTEXT_LENGTH,
    ),
    (
        "google_400_input_token_count",
        o(
            400,
            type="INVALID_ARGUMENT",
            msg="The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).",
        ),
        K.CONTEXT_LENGTH,
    ),
    (
        "groq_400_reduce_length",
        o(
            400,
            type="invalid_request_error",
            code="context_length_exceeded",
            msg="Please reduce the length of the messages or completion.",
        ),
        K.CONTEXT_LENGTH,
    ),
    (
        "mistral_400_max_context_length",
        o(
            400,
            msg="Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
        ),
        K.CONTEXT_LENGTH,
    ),
    (
        "bedrock_400_input_too_long",
        o(400, type="ValidationException", msg="Input is too long for requested model."),
        K.CONTEXT_LENGTH,
    ),
    (
        "bedrock_400_too_many_input_tokens",
        o(
            400,
            type="ValidationException",
            msg="Too many input tokens. Max input tokens: 8192, request input token count: 9000",
        ),
        K.CONTEXT_LENGTH,
    ),
    (
        "cohere_400_too_many_tokens",
        o(400, msg="too many tokens: total number of tokens in the prompt cannot exceed 4081"),
        K.CONTEXT_LENGTH,
    ),
    ("generic_400_context_window", o(400, msg="Request exceeds the context window of this model"), K.CONTEXT_LENGTH),
    (
        "vllm_413_context_length",
        o(413, msg="This model's maximum context length is 4096 tokens. However, you requested 4203 tokens."),
        K.CONTEXT_LENGTH,
    ),
    # --- 400 content policy ---------------------------------------------------
    ("azure_400_content_filter", o(400, code="content_filter", msg=AZURE_FILTER), K.CONTENT_POLICY),
    (
        "azure_400_content_filter_curly_quote",
        o(
            400,
            code="content_filter",
            msg="The response was filtered due to the prompt triggering Azure OpenAI\u2019s content management policy.",
        ),
        K.CONTENT_POLICY,
    ),
    ("azure_400_responsible_ai_code", o(400, code="ResponsibleAIPolicyViolation"), K.CONTENT_POLICY),
    (
        "openai_400_content_policy_violation",
        o(
            400,
            type="invalid_request_error",
            code="content_policy_violation",
            msg="Your request was rejected as a result of our safety system.",
        ),
        K.CONTENT_POLICY,
    ),
    (
        "openai_400_safety_system_wording",
        o(400, msg="Your request was rejected by the safety system."),
        K.CONTENT_POLICY,
    ),
    (
        "openai_400_invalid_prompt_usage_policy",
        o(
            400,
            type="invalid_request_error",
            code="invalid_prompt",
            msg="Invalid prompt: your prompt was flagged as potentially violating our usage policy.",
        ),
        K.CONTENT_POLICY,
    ),
    (
        "generic_400_violates_policies",
        o(400, msg="This request violates our acceptable use policies"),
        K.CONTENT_POLICY,
    ),
    (
        "anthropic_400_output_blocked",
        o(400, type="invalid_request_error", msg="Output blocked by content filtering policy"),
        K.CONTENT_POLICY,
    ),
    # --- other 4xx --------------------------------------------------------------
    (
        "openai_400_bad_param",
        o(400, type="invalid_request_error", msg="Invalid value for 'temperature': expected a number <= 2."),
        K.CLIENT_ERROR,
    ),
    (
        "openai_400_max_tokens_too_large",
        o(
            400,
            type="invalid_request_error",
            code="invalid_value",
            msg="max_tokens is too large: 100000. This model supports at most 4096 completion tokens, whereas you provided 100000.",
        ),
        K.CLIENT_ERROR,
    ),
    (
        "anthropic_400_max_tokens_output",
        o(
            400,
            type="invalid_request_error",
            msg="max_tokens: 10000 > 4096, which is the maximum allowed number of output tokens for claude-3-5-sonnet-20240620",
        ),
        K.CLIENT_ERROR,
    ),
    (
        "openai_404_model_not_found",
        o(
            404,
            type="invalid_request_error",
            code="model_not_found",
            msg="The model `gpt-9` does not exist or you do not have access to it.",
        ),
        K.CLIENT_ERROR,
    ),
    ("anthropic_404_not_found", o(404, type="not_found_error", msg="model: claude-9"), K.CLIENT_ERROR),
    ("anthropic_409_conflict", o(409, msg="conflict"), K.CLIENT_ERROR),
    (
        "anthropic_413_request_too_large",
        o(413, type="request_too_large", msg="Request exceeds the maximum allowed number of bytes."),
        K.CLIENT_ERROR,
    ),
    ("groq_413_tpm_request_too_large", o(413, type="tokens", code="rate_limit_exceeded", msg=GROQ_413), K.CLIENT_ERROR),
    ("mistral_422_validation", o(422, msg="Input should be a valid string"), K.CLIENT_ERROR),
    ("plain_451", o(451), K.CLIENT_ERROR),
    ("plain_400_empty", o(400), K.CLIENT_ERROR),
    # --- anything else ----------------------------------------------------------
    ("plain_100", o(100), K.MALFORMED),
    ("plain_101", o(101), K.MALFORMED),
    ("plain_301", o(301), K.MALFORMED),
    ("plain_302", o(302), K.MALFORMED),
    ("plain_304", o(304), K.MALFORMED),
    ("out_of_range_600", o(600), K.MALFORMED),
    ("out_of_range_0", o(0), K.MALFORMED),
    ("out_of_range_negative", o(-1), K.MALFORMED),
]


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [(c[1], c[2]) for c in CLASSIFY_CASES],
    ids=[c[0] for c in CLASSIFY_CASES],
)
def test_classify_default_table(outcome: Outcome, expected: FailureKind) -> None:
    assert classify(outcome) is expected


def test_classify_case_ids_are_unique() -> None:
    ids = [c[0] for c in CLASSIFY_CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(
    ("outcome", "kind"),
    [c[1:] for c in CLASSIFY_CASES],
    ids=[c[0] for c in CLASSIFY_CASES],
)
def test_every_retryable_class_is_matched_by_the_default_lists(outcome: Outcome, kind: FailureKind) -> None:
    """Whatever decided the class (status, code, wording), a RATE_LIMITED or
    SERVER_ERROR outcome is retried and fails over under the SPEC §4 defaults."""
    if kind not in (K.RATE_LIMITED, K.SERVER_ERROR):
        return
    assert status_matches(status_for_lists(outcome, kind, purpose="retry"), [429, 500, 502, 503, 529])
    assert status_matches(status_for_lists(outcome, kind, purpose="fallback"), [408, 429, "5xx"])


# --- disposition and health tables ---------------------------------------------

DISPOSITION_CASES: list[tuple[FailureKind, Disposition, bool]] = [
    (K.SUCCESS, Disposition.SUCCESS, False),
    (K.RATE_LIMITED, Disposition.RETRY_THEN_FALLBACK, True),
    (K.SERVER_ERROR, Disposition.RETRY_THEN_FALLBACK, True),
    (K.TRANSPORT, Disposition.RETRY_THEN_FALLBACK, True),
    (K.OTHER_5XX, Disposition.FALLBACK_NOW, True),
    (K.TIMEOUT, Disposition.FALLBACK_NOW, True),
    (K.MALFORMED, Disposition.FALLBACK_NOW, True),
    (K.NO_CREDENTIAL, Disposition.FALLBACK_NOW, False),
    (K.QUOTA_EXHAUSTED, Disposition.FALLBACK_NOW, True),
    (K.AUTH, Disposition.TERMINAL, False),
    (K.CLIENT_ERROR, Disposition.TERMINAL, False),
    (K.CONTEXT_LENGTH, Disposition.TERMINAL, False),
    (K.CONTENT_POLICY, Disposition.TERMINAL, False),
    (K.CANCELLED, Disposition.TERMINAL, False),
]


@pytest.mark.parametrize(
    ("kind", "expected", "counted"),
    DISPOSITION_CASES,
    ids=[c[0].value for c in DISPOSITION_CASES],
)
def test_disposition_and_health_per_kind(kind: FailureKind, expected: Disposition, counted: bool) -> None:
    assert disposition(kind) is expected
    assert DISPOSITION[kind] is expected
    assert counts_against_health(kind) is counted


def test_disposition_table_covers_every_failure_kind() -> None:
    assert set(DISPOSITION) == set(FailureKind)
    assert {c[0] for c in DISPOSITION_CASES} == set(FailureKind)


def test_disposition_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        DISPOSITION[K.SUCCESS] = Disposition.TERMINAL  # type: ignore[index]


def test_counts_against_health_is_subset_of_non_success_kinds() -> None:
    assert COUNTS_AGAINST_HEALTH <= set(FailureKind) - {K.SUCCESS}


def test_counts_against_health_junk_is_false() -> None:
    assert counts_against_health([]) is False  # type: ignore[arg-type]
    assert counts_against_health("nope") is False  # type: ignore[arg-type]


@given(outcomes)
def test_classify_never_raises_and_returns_a_failure_kind(outcome: Outcome) -> None:
    kind = classify(outcome)
    assert isinstance(kind, FailureKind)
    assert kind not in {K.NO_CREDENTIAL, K.CANCELLED}
    assert isinstance(disposition(kind), Disposition)


@given(
    st.builds(
        Outcome,
        status=st.one_of(st.none(), st.integers(min_value=200, max_value=299)),
        transport=st.one_of(st.none(), st.sampled_from(TransportError)),
        error_type=optional_texts,
        error_code=optional_texts,
        message=texts,
        error_in_body=st.just(True),
    )
)
def test_error_in_body_is_never_success(outcome: Outcome) -> None:
    assert classify(outcome) is not K.SUCCESS
