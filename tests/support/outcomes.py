"""Attempt outcomes for the classification tests: a short builder, provider errors as the
providers word them, and hypothesis strategies of arbitrary outcomes (SPEC §3)."""

from __future__ import annotations

from typing import Literal

from hypothesis import strategies as st

from turnout.core.types import FailureKind, Outcome, TransportError

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

Purpose = Literal["retry", "fallback"]

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
