"""Table tests for turnout.core.classify (SPEC §3 default classification)."""

from __future__ import annotations

from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnout.core.classify import (
    COUNTS_AGAINST_HEALTH,
    DISPOSITION,
    classify,
    counts_against_health,
    disposition,
    envelope_status,
    kind_from_message,
    status_for_lists,
    status_matches,
    status_set,
    transport_kind_from_message,
)
from turnout.core.types import Disposition, FailureKind, Outcome, TransportError

K = FailureKind
T = TransportError


def o(
    status: int | None = None,
    *,
    type: str | None = None,
    code: str | None = None,
    msg: str = "",
    in_body: bool = False,
    transport: TransportError | None = None,
) -> Outcome:
    return Outcome(
        status=status,
        transport=transport,
        error_type=type,
        error_code=code,
        message=msg,
        error_in_body=in_body,
    )


# Realistic provider bodies (messages as the providers word them).
OPENAI_TPM = (
    "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): "
    "Limit 30000, Used 29000, Requested 2000. Please try again in 2s. Visit "
    "https://platform.openai.com/account/rate-limits to learn more. You can increase "
    "your rate limit by adding a payment method to your account at "
    "https://platform.openai.com/account/billing."
)
OPENAI_QUOTA = (
    "You exceeded your current quota, please check your plan and billing details. For "
    "more information on this error, read the docs: "
    "https://platform.openai.com/docs/guides/error-codes/api-errors."
)
OPENAI_CONTEXT = (
    "This model's maximum context length is 8192 tokens. However, your messages "
    "resulted in 8227 tokens. Please reduce the length of the messages."
)
AZURE_FILTER = (
    "The response was filtered due to the prompt triggering Azure OpenAI's content "
    "management policy. Please modify your prompt and retry. To learn more about our "
    "content filtering policies please read our documentation: "
    "https://go.microsoft.com/fwlink/?linkid=2198766"
)
AZURE_TPM = (
    "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version "
    "2024-08-01-preview have exceeded token rate limit of your current OpenAI S0 "
    "pricing tier. Please retry after 7 seconds. Please go here: "
    "https://aka.ms/oai/quotaincrease if you would like to further increase the "
    "default rate limit."
)
ANTHROPIC_CREDIT = (
    "Your credit balance is too low to access the Anthropic API. Please go to Plans & "
    "Billing to upgrade or purchase credits."
)
ANTHROPIC_USAGE = "You have reached your specified API usage limits. You will regain access on 2025-07-01 at 00:00 UTC."
ANTHROPIC_429 = (
    "Number of request tokens has exceeded your per-minute rate limit "
    "(https://docs.anthropic.com/en/api/rate-limits); see the response headers for "
    "current usage. Please reduce the prompt length or the maximum tokens requested, "
    "or try again later. You may also contact sales at "
    "https://www.anthropic.com/contact-sales to discuss your options for a rate limit "
    "increase."
)
GROQ_TPM = (
    "Rate limit reached for model `llama3-70b-8192` in organization `org_01abc` on "
    "tokens per minute (TPM): Limit 7000, Used 0, Requested ~12903. Please try again "
    "in 50.597142857s. Need more tokens? Upgrade to Dev Tier today at "
    "https://console.groq.com/settings/billing"
)
GROQ_413 = (
    "Request too large for model `llama-3.1-8b-instant` in organization `org_01abc` "
    "service tier `on_demand` on tokens per minute (TPM): Limit 6000, Requested 6294, "
    "please reduce your message size and try again."
)

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


# --- status_for_lists ----------------------------------------------------------------

Purpose = Literal["retry", "fallback"]

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


# --- properties -------------------------------------------------------------------------

WORDS = [
    "rate limit",
    "Overloaded",
    "quota exceeded",
    "credit balance",
    "prompt is too long",
    "content_filter",
    "context_length_exceeded",
    "insufficient_quota",
    "socket hang up",
    "timed out",
    "capacity",
    "billing_error",
    "overloaded_error",
    "429",
    "5xx",
    "",
]
texts = st.one_of(st.text(max_size=200), st.sampled_from(WORDS))
optional_texts = st.one_of(st.none(), texts)
statuses = st.one_of(st.none(), st.integers(), st.integers(min_value=100, max_value=599))

outcomes = st.builds(
    Outcome,
    status=statuses,
    transport=st.one_of(st.none(), st.sampled_from(TransportError)),
    error_type=optional_texts,
    error_code=optional_texts,
    message=texts,
    retry_after_s=st.one_of(st.none(), st.floats()),
    error_in_body=st.booleans(),
)


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


@given(st.text())
def test_message_fallbacks_never_raise(message: str) -> None:
    assert transport_kind_from_message(message) is None or isinstance(
        transport_kind_from_message(message), TransportError
    )
    result = kind_from_message(message)
    assert result is None or isinstance(result, FailureKind)


def test_a_status_list_is_parsed_once_and_matches_codes_and_classes() -> None:
    parsed = status_set((429, "5xx", " 408 ", True, 1.5, "5x", None))
    assert parsed is status_set((429, "5xx", " 408 ", True, 1.5, "5x", None))  # the same list is not parsed again
    assert (sorted(parsed.codes), sorted(parsed.classes)) == ([408, 429], [5])
    assert [s in parsed for s in (408, 429, 500, 599, 600, 404, True)] == [True, True, True, True, False, False, False]
    assert status_set("5xx") == status_set(("5xx",)) and status_set(7) == status_set(())  # a junk list is empty
    assert status_set([{"unhashable": 1}, 503]).codes == frozenset({503})
