"""Default classification of one attempt's outcome (SPEC §3).

Owns: the SPEC §3 default classification table (`classify`), the
FailureKind → Disposition table, the set of kinds that count against provider
health, the status used to match a policy's status lists, and the wording
fallbacks used when an adapter has no exception type or status to go on.

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

import dataclasses
import functools
import re
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Literal, cast

from turnout.core.types import Disposition, FailureKind, Outcome, TransportError

__all__ = [
    "COUNTS_AGAINST_HEALTH",
    "DISPOSITION",
    "classify",
    "counts_against_health",
    "disposition",
    "envelope_status",
    "kind_from_message",
    "status_for_lists",
    "status_matches",
    "transport_kind_from_message",
]

# --------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------

DISPOSITION: Final[Mapping[FailureKind, Disposition]] = types.MappingProxyType(
    {
        FailureKind.SUCCESS: Disposition.SUCCESS,
        FailureKind.RATE_LIMITED: Disposition.RETRY_THEN_FALLBACK,
        FailureKind.SERVER_ERROR: Disposition.RETRY_THEN_FALLBACK,
        FailureKind.TRANSPORT: Disposition.RETRY_THEN_FALLBACK,
        FailureKind.OTHER_5XX: Disposition.FALLBACK_NOW,
        FailureKind.TIMEOUT: Disposition.FALLBACK_NOW,
        FailureKind.MALFORMED: Disposition.FALLBACK_NOW,
        FailureKind.NO_CREDENTIAL: Disposition.FALLBACK_NOW,
        FailureKind.QUOTA_EXHAUSTED: Disposition.FALLBACK_NOW,
        FailureKind.AUTH: Disposition.TERMINAL,
        FailureKind.CLIENT_ERROR: Disposition.TERMINAL,
        FailureKind.CONTEXT_LENGTH: Disposition.TERMINAL,
        FailureKind.CONTENT_POLICY: Disposition.TERMINAL,
        FailureKind.CANCELLED: Disposition.TERMINAL,
    }
)
"""FailureKind → Disposition, the "class" column of SPEC §3 (total)."""

COUNTS_AGAINST_HEALTH: Final[frozenset[FailureKind]] = frozenset(
    {
        FailureKind.RATE_LIMITED,
        FailureKind.SERVER_ERROR,
        FailureKind.OTHER_5XX,
        FailureKind.TRANSPORT,
        FailureKind.TIMEOUT,
        FailureKind.MALFORMED,
        FailureKind.QUOTA_EXHAUSTED,
    }
)
"""Kinds that are provider failures for the circuit breaker (SPEC §5).

Success, client errors (other 4xx), auth, context-length, content-policy,
missing credentials and client cancellation never count.
"""

_TRANSPORT_KIND: Final[Mapping[TransportError, FailureKind]] = types.MappingProxyType(
    {
        TransportError.CONNECT: FailureKind.TRANSPORT,
        TransportError.RESET: FailureKind.TRANSPORT,
        TransportError.ATTEMPT_TIMEOUT: FailureKind.TIMEOUT,
        TransportError.FIRST_TOKEN_TIMEOUT: FailureKind.TIMEOUT,
        TransportError.PROTOCOL: FailureKind.MALFORMED,
    }
)

# (status for retry lists, status for fallback lists) when the outcome carries
# no usable HTTP status. SPEC §3: transport failures "are retried as if they
# were a 503 and fail over as if they were a 502".
_SYNTHETIC_STATUS: Final[Mapping[FailureKind, tuple[int, int]]] = types.MappingProxyType(
    {
        FailureKind.TRANSPORT: (503, 502),
        FailureKind.TIMEOUT: (504, 504),
        FailureKind.MALFORMED: (502, 502),
        FailureKind.RATE_LIMITED: (429, 429),
        FailureKind.SERVER_ERROR: (503, 503),
        FailureKind.OTHER_5XX: (502, 502),
    }
)

_SERVER_ERROR_STATUSES: Final[frozenset[int]] = frozenset({500, 502, 503, 529})

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
# `_TYPE_CODE_QUOTA`); a bare "billing" in a *message* does not, because rate
# limit messages link to billing pages (Groq, OpenAI).
_QUOTA_WORDING: Final = re.compile(
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
_TYPE_CODE_QUOTA: Final = re.compile(r"quota|billing")

# 403 that is really a rate limit / overload (SPEC §3 row 2).
_RATE_LIMIT_WORDING: Final = re.compile(r"rate ?limit|too many requests|throttl|resource exhausted")
_OVERLOAD_WORDING: Final = re.compile(r"overload|capacity|high demand|service unavailable|temporarily unavailable")

_CONTEXT_LENGTH_WORDING: Final = re.compile(
    r"context (?:length|window|limit)"
    r"|(?:prompt|input) (?:is )?too long"
    r"|too many (?:input )?tokens"
    r"|maximum number of tokens allowed"
    r"|input token count.{0,40}exceeds"
    r"|reduce the length of the messages"
)

_CONTENT_POLICY_WORDING: Final = re.compile(
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


def _normalise(*parts: object) -> str:
    """Lower-case and join the string parts; `_`, `-`, whitespace → one space."""
    texts = [p for p in parts if isinstance(p, str) and p]
    return _WS.sub(" ", " ".join(texts).lower())


def _int_status(status: object) -> int | None:
    """The status as an int, or None when absent or not an int (bools are junk)."""
    if isinstance(status, int) and not isinstance(status, bool):
        return status
    return None


def _is_2xx(status: int | None) -> bool:
    return status is not None and 200 <= status < 300


# --------------------------------------------------------------------------
# Public functions
# --------------------------------------------------------------------------


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
    text = _normalise(message)
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
    text = _normalise(message)
    if not text:
        return None
    if _QUOTA_WORDING.search(text):
        return FailureKind.QUOTA_EXHAUSTED
    if _OVERLOAD_WORDING.search(text):
        return FailureKind.SERVER_ERROR
    if _RATE_LIMIT_WORDING.search(text):
        return FailureKind.RATE_LIMITED
    transport = transport_kind_from_message(message)
    if transport is not None:
        return _TRANSPORT_KIND[transport]
    return None


def _speaks_of_quota(outcome: Outcome) -> bool:
    type_code = _normalise(outcome.error_type, outcome.error_code)
    if _TYPE_CODE_QUOTA.search(type_code):
        return True
    return bool(_QUOTA_WORDING.search(_normalise(outcome.message)))


def _google_rate_limit(status: int, outcome: Outcome) -> bool:
    """A Google API's 429 `RESOURCE_EXHAUSTED` that says when to come back (a `RetryInfo` delay):
    a per-minute quota, so a rate limit whatever its wording ("You exceeded your current quota"
    is how Gemini words every rate limit; https://ai.google.dev/gemini-api/docs/rate-limits)."""
    return (
        status == 429 and outcome.retry_after_s is not None and _normalise(outcome.error_code) == "resource exhausted"
    )


def _classify_status(status: int, outcome: Outcome) -> FailureKind:
    """SPEC §3 table for an outcome that carries (or stands for) an error status."""
    if _google_rate_limit(status, outcome):
        return FailureKind.RATE_LIMITED
    if status == 402 or _speaks_of_quota(outcome):
        return FailureKind.QUOTA_EXHAUSTED
    haystack = _normalise(outcome.message, outcome.error_type, outcome.error_code)
    if status == 429:
        return FailureKind.RATE_LIMITED
    if status == 401:
        return FailureKind.AUTH
    if status == 403:
        if _RATE_LIMIT_WORDING.search(haystack) or _OVERLOAD_WORDING.search(haystack):
            return FailureKind.RATE_LIMITED
        if _CONTENT_POLICY_WORDING.search(haystack):
            return FailureKind.CONTENT_POLICY
        return FailureKind.AUTH
    if status == 408:
        return FailureKind.TIMEOUT
    if 400 <= status < 500:
        if _CONTEXT_LENGTH_WORDING.search(haystack):
            return FailureKind.CONTEXT_LENGTH
        if _CONTENT_POLICY_WORDING.search(haystack):
            return FailureKind.CONTENT_POLICY
        return FailureKind.CLIENT_ERROR
    if status in _SERVER_ERROR_STATUSES:
        return FailureKind.SERVER_ERROR
    if status == 504:
        return FailureKind.TIMEOUT
    if 500 <= status < 600:
        return FailureKind.OTHER_5XX
    return FailureKind.MALFORMED


def classify(outcome: Outcome) -> FailureKind:
    """Classify one attempt's outcome with the SPEC §3 default table.

    Order of the rules:

    1. A 2xx (or no status) with `error_in_body` is classified by its
       `error_code` / `error_type` as if it had the status `envelope_status`
       gives (unknown → 500); never SUCCESS.
    2. A 2xx with a `transport` failure (the body or stream broke after the
       head) is classified by the transport kind; any other 2xx is SUCCESS.
    3. No status: `transport` CONNECT / RESET → TRANSPORT, ATTEMPT_TIMEOUT /
       FIRST_TOKEN_TIMEOUT → TIMEOUT, PROTOCOL → MALFORMED; with no transport
       either: quota in the type / code (rule 4), else the message wording
       (`kind_from_message`: quota, overloaded / capacity → SERVER_ERROR,
       rate limit, transport wording), else MALFORMED.
    4. A Google 429 `RESOURCE_EXHAUSTED` with a retry hint → RATE_LIMITED (`_google_rate_limit`).
       Quota exhaustion, before any other rate-limit rule and in any status: HTTP 402,
       `quota` / `billing` in the error type or code (OpenAI
       `insufficient_quota` even on 429, Anthropic `billing_error`), or quota
       wording in the message (Anthropic "credit balance is too low", "spend
       limit", "usage limits") → QUOTA_EXHAUSTED.
    5. 429 → RATE_LIMITED. 401 → AUTH. 403 speaking of rate limit / overload /
       throttling / capacity → RATE_LIMITED; 403 with content-policy wording →
       CONTENT_POLICY; other 403 → AUTH. 408 → TIMEOUT.
    6. Other 4xx: context-length code or wording → CONTEXT_LENGTH;
       content-policy code or wording → CONTENT_POLICY; else CLIENT_ERROR.
    7. 500, 502, 503, 529 → SERVER_ERROR; 504 → TIMEOUT; other 5xx →
       OTHER_5XX.
    8. Anything else (1xx, 3xx, out-of-range numbers) → MALFORMED.

    NO_CREDENTIAL and CANCELLED are never returned: the shell knows those
    before any attempt outcome exists.

    Args:
        outcome: what the attempt produced, as built by an adapter.

    Returns:
        The FailureKind. Never raises.
    """
    status = _int_status(outcome.status)
    if status is None or _is_2xx(status):
        if outcome.error_in_body:
            return _classify_status(envelope_status(outcome.error_type, outcome.error_code), outcome)
        transport = outcome.transport
        if isinstance(transport, TransportError):
            return _TRANSPORT_KIND[transport]
        if status is not None:
            return FailureKind.SUCCESS
        if _speaks_of_quota(outcome):
            return FailureKind.QUOTA_EXHAUSTED
        return kind_from_message(outcome.message) or FailureKind.MALFORMED
    return _classify_status(status, outcome)


def disposition(kind: FailureKind) -> Disposition:
    """What the attempt loop may do after an outcome of this kind (SPEC §3).

    Args:
        kind: a FailureKind (its string value works too).

    Returns:
        The Disposition from `DISPOSITION`.

    Raises:
        KeyError: `kind` is not a FailureKind.
    """
    return DISPOSITION[kind]


def counts_against_health(kind: FailureKind) -> bool:
    """Whether this kind is a provider failure for the breaker (SPEC §5).

    Args:
        kind: a FailureKind.

    Returns:
        True for RATE_LIMITED, SERVER_ERROR, OTHER_5XX, TRANSPORT, TIMEOUT,
        MALFORMED and QUOTA_EXHAUSTED; False otherwise (including junk).
        Never raises.
    """
    try:
        return kind in COUNTS_AGAINST_HEALTH
    except TypeError:  # unhashable junk
        return False


def status_for_lists(
    outcome: Outcome,
    kind: FailureKind,
    *,
    purpose: Literal["retry", "fallback"],
) -> int | None:
    """The status matched against `retry.retry_on_status` / `fallback.on_status`.

    SPEC §3 / §4:

    - an HTTP error status (4xx / 5xx) is used as received, unless the
      class was decided by wording: then the status the class stands for
      (a 403 speaking of a rate limit or overload is RATE_LIMITED and is
      matched as 429; see `_standing_status`);
    - an error envelope inside a 2xx body (or a stream with no status) uses
      the status it is classified as (`envelope_status`: 429, 529, 500, …);
    - otherwise the status stands in for the kind: TRANSPORT → 503 for
      "retry" and 502 for "fallback" ("retried as if they were a 503 and fail
      over as if they were a 502"); TIMEOUT → 504; MALFORMED → 502 (also for
      a 1xx / 3xx or a 2xx whose body broke); RATE_LIMITED → 429 and
      SERVER_ERROR → 503 when they came from wording alone;
    - SUCCESS → the received status (or None).

    Args:
        outcome: the attempt's outcome.
        kind: its classification (normally `classify(outcome)`).
        purpose: "retry" for `retry.retry_on_status`, "fallback" for
            `fallback.on_status`.

    Returns:
        An HTTP status, or None when no status applies (the kinds decided by
        class, not by the lists: quota, no credential, auth, client errors
        without a status, cancelled). Never raises.
    """
    status = _int_status(outcome.status)
    if kind == FailureKind.SUCCESS:
        return status
    if status is not None and 400 <= status <= 599:
        return _standing_status(status, kind, purpose)
    if outcome.error_in_body and (status is None or _is_2xx(status)):
        return envelope_status(outcome.error_type, outcome.error_code)
    pair = _SYNTHETIC_STATUS.get(kind)
    if pair is None:
        return None
    return pair[0] if purpose == "retry" else pair[1]


_NATURAL_STATUSES: Final[Mapping[FailureKind, frozenset[int]]] = types.MappingProxyType(
    {
        FailureKind.RATE_LIMITED: frozenset({429}),
        FailureKind.SERVER_ERROR: _SERVER_ERROR_STATUSES,
        FailureKind.TIMEOUT: frozenset({408, 504}),
    }
)
"""Statuses that are a kind's own: any other status of that kind was decided by wording."""


def _standing_status(status: int, kind: FailureKind, purpose: Literal["retry", "fallback"]) -> int:
    """`status` as received, or the status its kind stands for when the kind
    came from the wording (403 + "rate limit" → 429). Kinds decided by class
    (quota, auth, client errors…) keep the received status."""
    natural = _NATURAL_STATUSES.get(kind)
    if natural is None or status in natural:
        return status
    pair = _SYNTHETIC_STATUS[kind]
    return pair[0] if purpose == "retry" else pair[1]


_CLASS_ENTRY: Final = re.compile(r"([1-5])xx")
_CODE_ENTRY: Final = re.compile(r"[1-5][0-9][0-9]")


@dataclasses.dataclass(frozen=True, slots=True)
class StatusSet:
    """A policy status list, parsed: single codes and whole classes (`5` for `"5xx"`)."""

    codes: frozenset[int]
    classes: frozenset[int]

    def __contains__(self, status: object) -> bool:
        if isinstance(status, bool) or not isinstance(status, int):
            return False
        return status in self.codes or (100 <= status <= 599 and status // 100 in self.classes)


_NO_STATUS: Final = StatusSet(frozenset(), frozenset())


@functools.lru_cache(maxsize=256)
def _parsed(entries: tuple[object, ...]) -> StatusSet:
    codes: set[int] = set()
    classes: set[int] = set()
    for entry in entries:
        if isinstance(entry, bool):
            continue
        if isinstance(entry, int):
            codes.add(entry)
        elif isinstance(entry, str):
            text = entry.strip().lower()
            cls = _CLASS_ENTRY.fullmatch(text)
            if cls is not None:
                classes.add(int(cls.group(1)))
            elif _CODE_ENTRY.fullmatch(text):
                codes.add(int(text))
    return StatusSet(frozenset(codes), frozenset(classes))


def status_set(entries: object) -> StatusSet:
    """`entries` (a policy status list) parsed once: a list seen before is not parsed again.

    Entries are single codes (`503`, also the string `"503"`) or whole classes
    as strings (`"5xx"`, `"4xx"`, any case, surrounding spaces ignored). Junk
    entries (bools, floats, `"5x"`, `"abc"`, `None`) are left out; a junk list
    is empty. Never raises.
    """
    if isinstance(entries, str):
        entries = (entries,)
    try:
        key = tuple(cast(Iterable[object], entries))
    except TypeError:  # not iterable
        return _NO_STATUS
    try:
        return _parsed(key)
    except TypeError:  # an unhashable entry: parse without the cache
        return _parsed.__wrapped__(key)


def status_matches(status: int | None, entries: Sequence[int | str]) -> bool:
    """Whether `status` is in a policy status list (SPEC §3 / §4), through `status_set`.

    Args:
        status: the status from `status_for_lists`, or None.
        entries: the policy's list.

    Returns:
        True when an entry matches; False for a None status, junk entries or a
        junk list. Never raises.
    """
    return status in status_set(entries)
    return False
