"""Provider error wording and error envelopes: what a failure says, read as a status or a kind (SPEC §3).

Owns: the tables of provider error `code` / `type` values and the HTTP status
each stands for (`envelope_status`), the wording rules (quota, rate limit,
overload, context length, content policy, transport failures) and the
message-only fallbacks (`transport_kind_from_message`, `kind_from_message`)
used when an adapter has no exception type or status to go on. The
classification rules that use them are `turnout.core.classify`.

Must not import: anything outside the standard library, msgspec and
`turnout.core`; no I/O, no clock, no randomness, no asyncio.

Sources of the rules:

- SPEC §3 "Default classification" (the table and its notes).
- OpenAI error codes: `insufficient_quota` (sent with HTTP 429),
  `context_length_exceeded`, `content_filter` (Azure OpenAI),
  `content_policy_violation`, `rate_limit_exceeded`; error types `tokens` /
  `requests` on rate limits.
- Anthropic error types: `invalid_request_error` (400), `authentication_error`
  (401), `billing_error` (402), `permission_error` (403), `not_found_error`
  (404), `request_too_large` (413), `rate_limit_error` (429), `api_error`
  (500), `overloaded_error` (529); wordings "prompt is too long: N tokens > M
  maximum", "Your credit balance is too low to access the Anthropic API",
  "You have reached your specified API usage limits".
- Wordings seen from Azure OpenAI ("content management policy",
  `ResponsibleAIPolicyViolation`), Google Gemini ("The input token count (N)
  exceeds the maximum number of tokens allowed (M)"), Groq / vLLM / Mistral
  ("maximum context length", "reduce the length of the messages"), Amazon
  Bedrock ("Input is too long for requested model", `ThrottlingException`,
  `ServiceQuotaExceededException`).

Wording rules match a normalised haystack: lower-cased, `_` and `-` turned
into spaces, runs of whitespace collapsed, so `context_length_exceeded` and
"context length exceeded" are the same text.
"""

from __future__ import annotations

import re
import types
from collections.abc import Mapping
from typing import Final

from turnout.core.types import FailureKind, Outcome, TransportError

__all__ = [
    "CONTENT_POLICY_WORDING",
    "CONTEXT_LENGTH_WORDING",
    "OVERLOAD_WORDING",
    "RATE_LIMIT_WORDING",
    "TRANSPORT_KIND",
    "envelope_status",
    "kind_from_message",
    "normalise",
    "speaks_of_quota",
    "transport_kind_from_message",
]

TRANSPORT_KIND: Final[Mapping[TransportError, FailureKind]] = types.MappingProxyType(
    {
        TransportError.CONNECT: FailureKind.TRANSPORT,
        TransportError.RESET: FailureKind.TRANSPORT,
        TransportError.ATTEMPT_TIMEOUT: FailureKind.TIMEOUT,
        TransportError.FIRST_TOKEN_TIMEOUT: FailureKind.TIMEOUT,
        TransportError.PROTOCOL: FailureKind.MALFORMED,
    }
)
"""The FailureKind of each transport failure (SPEC §3 row 5)."""

# Provider error `code` / `type` values (normalised: lower case, `-` and spaces
# as `_`) → the HTTP status they stand for. Used for error envelopes found in
# a 2xx body or stream (SPEC §3: "classified by its code / type as if it were
# that status").
_ENVELOPE_EXACT: Final[Mapping[str, int]] = types.MappingProxyType(
    {
        # rate limits (OpenAI, Anthropic, Groq, Google, Bedrock)
        "rate_limit": 429,
        "rate_limit_error": 429,
        "rate_limit_exceeded": 429,
        "ratelimitexceeded": 429,
        "too_many_requests": 429,
        "resource_exhausted": 429,
        "throttling": 429,
        "throttlingexception": 429,
        "tokens": 429,
        "requests": 429,
        # overload
        "overloaded": 529,
        "overloaded_error": 529,
        # server side
        "server_error": 500,
        "api_error": 500,
        "internal_error": 500,
        "internal_server_error": 500,
        "internalserverexception": 500,
        "modelerrorexception": 500,
        "bad_gateway": 502,
        "service_unavailable": 503,
        "serviceunavailableexception": 503,
        "unavailable": 503,
        "modelnotreadyexception": 503,
        "gateway_timeout": 504,
        "timeout": 408,
        "request_timeout": 408,
        "deadline_exceeded": 504,
        "modeltimeoutexception": 408,
        # quota / billing (the quota rule decides these; the status is for lists)
        "insufficient_quota": 429,
        "billing": 402,
        "billing_error": 402,
        "billing_hard_limit_reached": 429,
        "billing_not_active": 429,
        "servicequotaexceededexception": 429,
        # client side
        "invalid_request_error": 400,
        "invalid_request": 400,
        "bad_request": 400,
        "invalid_argument": 400,
        "validation_error": 400,
        "validationexception": 400,
        "context_length_exceeded": 400,
        "content_filter": 400,
        "content_policy_violation": 400,
        "invalid_prompt": 400,
        "authentication": 401,
        "authentication_error": 401,
        "invalid_api_key": 401,
        "unauthenticated": 401,
        "unauthorized": 401,
        "permission_error": 403,
        "permission_denied": 403,
        "forbidden": 403,
        "accessdeniedexception": 403,
        "not_found": 404,
        "not_found_error": 404,
        "model_not_found": 404,
        "resourcenotfoundexception": 404,
        "request_too_large": 413,
        "unprocessable_entity": 422,
    }
)

# Substring rules tried (in order) when no exact entry matched.
_ENVELOPE_CONTAINS: Final[tuple[tuple[str, int], ...]] = (
    ("quota", 429),
    ("billing", 402),
    ("rate_limit", 429),
    ("ratelimit", 429),
    ("throttl", 429),
    ("overload", 529),
    ("unauth", 401),
    ("authentic", 401),
    ("permission", 403),
    ("forbidden", 403),
    ("access_denied", 403),
    ("not_found", 404),
    ("notfound", 404),
    ("timeout", 408),
    ("context_length", 400),
    ("content_filter", 400),
    ("content_policy", 400),
    ("invalid", 400),
    ("validation", 400),
    ("unavailable", 503),
    ("server", 500),
)

_ENVELOPE_DEFAULT_STATUS: Final = 500

# --------------------------------------------------------------------------
# Wording rules (applied to the normalised haystack, see module docstring)
# --------------------------------------------------------------------------

# Provider quota / credit exhausted (SPEC §3: "any status, or wording with
# none"). `quota` / `billing` inside an error type or code also counts (see
# `TYPE_CODE_QUOTA`); a bare "billing" in a *message* does not, because rate
# limit messages link to billing pages (Groq, OpenAI).
QUOTA_WORDING: Final = re.compile(
    r"insufficient quota"
    r"|exceeded your (?:current )?quota"
    r"|quota (?:has been |was |is )?(?:exceeded|exhausted)"
    r"|(?:exceeded|exhausted) (?:the |your )?(?:\w+ )?quota"
    r"|out of quota"
    r"|credit balance"
    r"|insufficient (?:credit|balance|funds)"
    r"|out of credits"
    r"|spend(?:ing)? limit"
    r"|usage limit"
    r"|billing (?:hard )?limit"
    r"|plan and billing details"
)
TYPE_CODE_QUOTA: Final = re.compile(r"quota|billing")

# 403 that is really a rate limit / overload (SPEC §3 row 2).
RATE_LIMIT_WORDING: Final = re.compile(r"rate ?limit|too many requests|throttl|resource exhausted")
OVERLOAD_WORDING: Final = re.compile(r"overload|capacity|high demand|service unavailable|temporarily unavailable")

CONTEXT_LENGTH_WORDING: Final = re.compile(
    r"context (?:length|window|limit)"
    r"|(?:prompt|input) (?:is )?too long"
    r"|too many (?:input )?tokens"
    r"|maximum number of tokens allowed"
    r"|input token count.{0,40}exceeds"
    r"|reduce the length of the messages"
)

CONTENT_POLICY_WORDING: Final = re.compile(
    r"content management policy"
    r"|content (?:filter|policy)"
    r"|safety (?:system|filter)"
    r"|responsible ?ai"
    r"|usage polic(?:y|ies)"
    r"|usage guidelines"
    r"|prohibited content"
    r"|violat\w*\b.{0,40}?(?:polic|guideline)"
)

# Transport wording, for when no exception type exists (SPEC §3 row 5).
_FIRST_TOKEN_TIMEOUT_WORDING: Final = re.compile(r"(?:first (?:token|byte)|ttft).{0,40}?(?:timed? ?out|timeout)")
# A timeout while connecting never reached the provider: CONNECT, as the
# adapters map httpx.ConnectTimeout.
_CONNECT_TIMEOUT_WORDING: Final = re.compile(
    r"connect(?:ion)? (?:timed? ?out|timeout|etimedout)"
    r"|connecttimeout|timed out (?:while )?connecting"
)
_TIMEOUT_WORDING: Final = re.compile(r"timed? ?out|timeout|etimedout|deadline exceeded")
_CONNECT_WORDING: Final = re.compile(
    r"refused|econnrefused"
    r"|name resolution|getaddrinfo|enotfound|eai again|eai noname"
    r"|name or service not known|nodename nor servname|no address associated"
    r"|could not resolve|failed to resolve|\bdns\b"
    r"|no route to host|ehostunreach|enetunreach|network is unreachable"
    r"|certificate verify failed|(?:ssl|tls) handshake"
    r"|connection attempts failed|failed to establish a new connection"
    r"|(?:cannot|can't|could not|unable to) connect|connect error"
    r"|fetch failed|failed to fetch|connection error"
)
_RESET_WORDING: Final = re.compile(
    r"\breset\b|econnreset|socket hang up|premature close|premature end"
    r"|\bepipe\b|broken pipe|connection aborted|econnaborted"
    r"|\beof\b|server disconnected|remote ?disconnected|remote end closed"
    r"|connection (?:was )?closed|closed (?:the )?connection|peer closed"
    r"|incomplete ?read|connection lost|stream ?(?:error|closed)"
)
_PROTOCOL_WORDING: Final = re.compile(
    r"protocol error|malformed|invalid http|invalid chunk|json ?decode"
    r"|expecting value|unparseable|failed to parse|could not parse"
)

_WS: Final = re.compile(r"[\s_\-]+")


def normalise(*parts: object) -> str:
    """Lower-case and join the string parts; `_`, `-`, whitespace → one space."""
    texts = [p for p in parts if isinstance(p, str) and p]
    return _WS.sub(" ", " ".join(texts).lower())


def envelope_status(error_type: str | None, error_code: str | None) -> int:
    """The HTTP status an error envelope's `code` / `type` stands for.

    Used for an error envelope found inside a 2xx body or stream, which SPEC §3
    classifies "by its code / type as if it were that status". The code is
    consulted before the type (it is the more specific of the two); an exact
    table is tried before substring rules. A numeric code such as Azure's
    `"429"` is taken as the status itself.

    Examples: `rate_limit_error` / `rate_limit_exceeded` → 429 (OpenAI,
    Anthropic); `overloaded_error` → 529 (Anthropic); `api_error` /
    `server_error` → 500; `insufficient_quota` → 429 (OpenAI sends it with
    429); `billing_error` → 402 (Anthropic); `invalid_request_error` → 400;
    `authentication_error` → 401; `permission_error` → 403;
    `not_found_error` → 404; `request_too_large` → 413.

    Args:
        error_type: provider error `type`, or None.
        error_code: provider error `code`, or None.

    Returns:
        An HTTP status in 400–599; 500 when nothing is recognised (an unknown
        error is treated as a server error). Never a 2xx. Never raises.
    """
    keys = [_WS.sub("_", v.strip().lower()) for v in (error_code, error_type) if isinstance(v, str) and v.strip()]
    for key in keys:
        if len(key) == 3 and key.isascii() and key.isdigit():
            numeric = int(key)
            if 400 <= numeric <= 599:
                return numeric
        exact = _ENVELOPE_EXACT.get(key)
        if exact is not None:
            return exact
    for key in keys:
        for needle, status in _ENVELOPE_CONTAINS:
            if needle in key:
                return status
    return _ENVELOPE_DEFAULT_STATUS


def transport_kind_from_message(message: str) -> TransportError | None:
    """Map a transport error's *message* to a TransportError (SPEC §3 row 5).

    Only for when no exception type exists: adapters map exception types
    first. Rules, first match wins:

    - first-token timeout wording → FIRST_TOKEN_TIMEOUT;
    - a timeout while connecting ("connect timeout", "connection timed out",
      "connect ETIMEDOUT") → CONNECT: the provider was never reached;
    - "timed out", "timeout", ETIMEDOUT, "deadline exceeded" → ATTEMPT_TIMEOUT;
    - "refused", DNS failures ("name resolution", getaddrinfo, ENOTFOUND,
      EAI_AGAIN, "Name or service not known"), unreachable host / network,
      TLS handshake or certificate failures, "fetch failed" (fetch() in
      Node), "failed to fetch" (browsers), "connection error" (the SDKs'
      generic connection failure) → CONNECT;
    - "reset", ECONNRESET, "socket hang up", "premature close", EPIPE,
      "broken pipe", "connection aborted", EOF, "server disconnected",
      "remote end closed connection", "stream error", "stream closed"
      (HTTP/2 stream resets) → RESET;
    - "protocol error", "malformed", JSON decode errors → PROTOCOL.

    Args:
        message: the exception's text, any case.

    Returns:
        The TransportError, or None when the wording is not recognised.
        Never raises.
    """
    text = normalise(message)
    if not text:
        return None
    if _FIRST_TOKEN_TIMEOUT_WORDING.search(text):
        return TransportError.FIRST_TOKEN_TIMEOUT
    if _CONNECT_TIMEOUT_WORDING.search(text):
        return TransportError.CONNECT
    if _TIMEOUT_WORDING.search(text):
        return TransportError.ATTEMPT_TIMEOUT
    if _CONNECT_WORDING.search(text):
        return TransportError.CONNECT
    if _RESET_WORDING.search(text):
        return TransportError.RESET
    if _PROTOCOL_WORDING.search(text):
        return TransportError.PROTOCOL
    return None


def kind_from_message(message: str) -> FailureKind | None:
    """Classify a failure from its message alone (no status, no exception type).

    SPEC §3: quota exhaustion counts "in any status, or wording with none", and
    transport failures are matched "on the message wording (reset, refused,
    socket hang up, premature close, overloaded, capacity, …) only where no
    type exists". Rules, first match wins:

    - quota / credit wording ("exceeded your current quota", "credit balance
      is too low", "spend limit", "usage limit", "insufficient credits") →
      QUOTA_EXHAUSTED;
    - "overloaded", "capacity", "high demand", "service unavailable" →
      SERVER_ERROR (treated like a 503 / 529);
    - "rate limit", "too many requests", "throttl…" → RATE_LIMITED;
    - transport wording (see `transport_kind_from_message`) → TRANSPORT,
      TIMEOUT or MALFORMED.

    Args:
        message: the error text, any case.

    Returns:
        The FailureKind, or None when the wording is not recognised.
        Never raises.
    """
    text = normalise(message)
    if not text:
        return None
    if QUOTA_WORDING.search(text):
        return FailureKind.QUOTA_EXHAUSTED
    if OVERLOAD_WORDING.search(text):
        return FailureKind.SERVER_ERROR
    if RATE_LIMIT_WORDING.search(text):
        return FailureKind.RATE_LIMITED
    transport = transport_kind_from_message(message)
    if transport is not None:
        return TRANSPORT_KIND[transport]
    return None


def speaks_of_quota(outcome: Outcome) -> bool:
    """Whether `outcome` speaks of quota: `quota` / `billing` in its error type or code, or quota wording."""
    type_code = normalise(outcome.error_type, outcome.error_code)
    if TYPE_CODE_QUOTA.search(type_code):
        return True
    return bool(QUOTA_WORDING.search(normalise(outcome.message)))
