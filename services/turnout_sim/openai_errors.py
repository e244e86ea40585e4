"""OpenAI error envelopes with realistic messages, types and codes.

Owns: every `{"error": {"message", "type", "param", "code"}}` body the
simulator sends on its OpenAI routes, per status and per named fault, worded
like the real API (shapes checked against published OpenAI error bodies).
Must not import: aiohttp or any I/O; pure functions of their arguments.
"""

from __future__ import annotations

from typing import Any

CONTEXT_LIMIT = 8192
"""Context window quoted by the `ctx` error, in tokens."""

ErrorBody = dict[str, dict[str, Any]]
"""An OpenAI error envelope as a JSON-ready dict."""


def envelope(message: str, type_: str | None, code: str | int | None, param: str | None = None) -> ErrorBody:
    """The OpenAI error envelope `{"error": {message, type, param, code}}`."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def rate_limit_error(model: str, retry_in: str = "2s") -> ErrorBody:
    """429 requests-per-minute limit (type `requests`, code `rate_limit_exceeded`).

    Args:
        model: model name quoted in the message.
        retry_in: the wait quoted in the message, OpenAI style (`2s`, `20ms`).
    """
    return envelope(
        f"Rate limit reached for {model} in organization org-sim on requests per min "
        f"(RPM): Limit 3, Used 3, Requested 1. Please try again in {retry_in}. "
        "Visit https://platform.openai.com/account/rate-limits to learn more.",
        "requests",
        "rate_limit_exceeded",
    )


def quota_error() -> ErrorBody:
    """429 insufficient_quota: credit exhausted, retrying does not help."""
    return envelope(
        "You exceeded your current quota, please check your plan and billing details. "
        "For more information on this error, read the docs: "
        "https://platform.openai.com/docs/guides/error-codes/api-errors.",
        "insufficient_quota",
        "insufficient_quota",
    )


def usage_cap_error(resets_in: str) -> ErrorBody:
    """429 usage limit of a subscription plan, quoting when it resets (`6m0s`)."""
    return envelope(
        f"Usage limit reached for your plan. Your limit resets in {resets_in}.",
        "usage_limit_reached",
        "usage_limit_reached",
    )


def context_length_error(prompt_tokens: int) -> ErrorBody:
    """400 context_length_exceeded, quoting `CONTEXT_LIMIT` tokens."""
    used = max(prompt_tokens, CONTEXT_LIMIT + 808)
    return envelope(
        f"This model's maximum context length is {CONTEXT_LIMIT} tokens. However, your "
        f"messages resulted in {used} tokens. Please reduce the length of the messages.",
        "invalid_request_error",
        "context_length_exceeded",
        "messages",
    )


def content_policy_error() -> ErrorBody:
    """400 content_policy_violation."""
    return envelope(
        "Your request was rejected as a result of our safety system. Your prompt may "
        "contain text that is not allowed by our safety system.",
        "invalid_request_error",
        "content_policy_violation",
    )


def missing_key_error() -> ErrorBody:
    """401 for a request with no usable `Authorization: Bearer` header."""
    return envelope(
        "You didn't provide an API key. You need to provide your API key in an "
        "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), "
        "or as the password field (with blank username) if you're accessing the API "
        "from your browser and are prompted for a username and password. You can "
        "obtain an API key from https://platform.openai.com/account/api-keys.",
        "invalid_request_error",
        None,
    )


def invalid_json_error() -> ErrorBody:
    """400 for a body that is not JSON (OpenAI's wording)."""
    return envelope(
        "We could not parse the JSON body of your request. (HINT: This likely means "
        "you aren't using your HTTP library correctly. The OpenAI API expects a JSON "
        "payload, but what was sent was not valid JSON. If you have trouble figuring "
        "out how to fix this, please contact us through our help center at "
        "help.openai.com.)",
        "invalid_request_error",
        None,
    )


def invalid_scenario_error(reason: str) -> ErrorBody:
    """400 explaining why the sim scenario (model name / header) is invalid."""
    return envelope(
        f"Invalid simulator scenario: {reason}",
        "invalid_request_error",
        "invalid_sim_scenario",
    )


def invalid_url_error(method: str, path: str) -> ErrorBody:
    """404 for an unknown route, as OpenAI answers it."""
    return envelope(f"Invalid URL ({method} {path})", "invalid_request_error", None)


def body_error(rate_limited: bool, model: str) -> ErrorBody:
    """The envelope sent inside a 200 body / first SSE event (`bodyerr`)."""
    if rate_limited:
        return rate_limit_error(model)
    return status_error(500, model)


def status_error(status: int, model: str) -> ErrorBody:
    """The realistic body for a bare error status step.

    Args:
        status: one of the statuses in `scenarios.ERROR_STATUSES`.
        model: requested model name, quoted where OpenAI quotes it.
    """
    if status == 429:
        return rate_limit_error(model)
    builders: dict[int, tuple[str, str | None, str | int | None]] = {
        400: (
            "Invalid value for 'messages': the request is malformed.",
            "invalid_request_error",
            None,
        ),
        401: (
            (
                "Incorrect API key provided: sk-sim****1234. You can find your API key at "
                "https://platform.openai.com/account/api-keys."
            ),
            "invalid_request_error",
            "invalid_api_key",
        ),
        403: (
            "Country, region, or territory not supported",
            "request_forbidden",
            "unsupported_country_region_territory",
        ),
        404: (
            f"The model `{model}` does not exist or you do not have access to it.",
            "invalid_request_error",
            "model_not_found",
        ),
        408: ("Request timed out.", "timeout", None),
        413: (
            "Request too large. Please reduce the size of your request.",
            "invalid_request_error",
            None,
        ),
        422: (
            "Unprocessable entity: the request could not be processed.",
            "invalid_request_error",
            None,
        ),
        500: (
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
            None,
        ),
        501: ("Not implemented.", "server_error", None),
        502: ("Bad gateway.", "cf_bad_gateway", 502),
        503: (
            "The engine is currently overloaded, please try again later.",
            "server_error",
            None,
        ),
        504: ("Gateway timeout.", "cf_gateway_timeout", 504),
        505: ("HTTP version not supported.", "server_error", None),
        529: ("Overloaded", "overloaded_error", None),
    }
    message, type_, code = builders[status]
    return envelope(message, type_, code)


def overloaded_error() -> ErrorBody:
    """503 for a request over the provider's capacity (`cap<N>`).

    Sent with `Retry-After: 1`; unlike the bare `503` step's "engine is
    currently overloaded" body, it speaks of the server as a whole.
    """
    return envelope(
        "The server is overloaded or not ready yet. Please retry after a short wait.",
        "server_error",
        "server_overloaded",
    )


def rate_limit_403_error(model: str) -> ErrorBody:
    """403 whose body speaks of a rate limit (some proxies answer so)."""
    return envelope(
        f"Rate limit reached for {model}: too many requests. Please try again in 2s.",
        "requests",
        "rate_limit_exceeded",
    )


def prefill_unsupported_error() -> ErrorBody:
    """400 for an assistant prefill sent to a model without prefill (`noprefill`)."""
    return envelope(
        "Assistant prefill is not supported for this model. The last message in "
        "'messages' must not have role 'assistant'.",
        "invalid_request_error",
        "unsupported_value",
        "messages",
    )
