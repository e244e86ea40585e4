"""Value types shared by the pure routing core.

Owns: the vocabulary of SPEC §2 as frozen data (targets, plan entries,
attempt outcomes, failure kinds and their dispositions).
Must not import: anything outside the standard library and msgspec; no I/O,
no clock, no randomness, no asyncio.
"""

from __future__ import annotations

import enum

import msgspec


class FailureKind(enum.StrEnum):
    """What one attempt's outcome was, after classification (SPEC §3 table).

    The value is stable: it is written into attempt records, logs and span
    attributes (`turnout.attempt.class` carries the disposition, `error.type`
    the kind).
    """

    SUCCESS = "success"
    RATE_LIMITED = "rate_limited"  # 429; 403 speaking of rate limit / overload
    SERVER_ERROR = "server_error"  # 500, 502, 503, 529
    OTHER_5XX = "other_5xx"  # 501, 505-599 not listed above
    TRANSPORT = "transport"  # refused / reset / DNS / closed before any byte
    TIMEOUT = "timeout"  # 408, 504, per-attempt timeout, first-token timeout
    MALFORMED = "malformed"  # unparseable upstream body or SSE
    NO_CREDENTIAL = "no_credential"  # no key for this provider
    QUOTA_EXHAUSTED = "quota_exhausted"  # provider credit / quota gone
    AUTH = "auth"  # 401; 403 otherwise
    CLIENT_ERROR = "client_error"  # 400, 404, 413, 422, other 4xx
    CONTEXT_LENGTH = "context_length"  # 400 context-length exceeded
    CONTENT_POLICY = "content_policy"  # 400 content-policy violation
    CANCELLED = "cancelled"  # the client went away


class Disposition(enum.StrEnum):
    """What the attempt loop may do after an outcome (SPEC §3 "class")."""

    SUCCESS = "success"
    RETRY_THEN_FALLBACK = "retry_then_fallback"
    FALLBACK_NOW = "fallback_now"
    TERMINAL = "terminal"


class TransportError(enum.StrEnum):
    """Transport-level failure with no HTTP status, as mapped by an adapter."""

    CONNECT = "connect"  # refused, DNS failure, unreachable
    RESET = "reset"  # reset or closed before any response byte
    ATTEMPT_TIMEOUT = "attempt_timeout"  # per-attempt timeout elapsed
    FIRST_TOKEN_TIMEOUT = "first_token_timeout"  # streaming TTFT elapsed
    PROTOCOL = "protocol"  # unparseable HTTP framing / body / SSE


class Target(msgspec.Struct, frozen=True, kw_only=True):
    """One offer: a (provider, model) pair that can be attempted (SPEC §2).

    Attributes:
        provider: configured provider name (`openai`, `sim-a`, ...).
        model: the model name the provider knows (`gpt-5-prod`).
        catalog_model: the catalog model id this offer serves (`gpt-5`).
    """

    provider: str
    model: str
    catalog_model: str

    @property
    def key(self) -> str:
        """`provider/model`: the breaker and health key of this target."""
        return f"{self.provider}/{self.model}"


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    """What one attempt produced, as data an adapter builds and the core reads.

    Exactly one of `status` (an HTTP status was received) or `transport` (no
    usable response) describes the failure; a success has `status` 2xx and no
    `error_*` fields.

    Attributes:
        status: HTTP status, or None when no response head arrived.
        transport: transport failure kind, or None.
        error_type: provider error `type` (OpenAI `error.type`, Anthropic
            `error.type`), including one found inside a 2xx body.
        error_code: provider error `code` (`insufficient_quota`, ...).
        message: provider's error message (for wording rules and the client).
        retry_after_s: the rate-limit hint parsed from *this* response, in
            seconds (never a stale earlier one), or None.
        error_in_body: True when a 2xx body or stream carried an error
            envelope (SPEC §3: never a success).
        should_retry: the provider's own word on re-sending this request
            (`x-should-retry: true` / `false`, `turnout.core.hints.should_retry_hint`),
            or None when it said nothing.
    """

    status: int | None = None
    transport: TransportError | None = None
    error_type: str | None = None
    error_code: str | None = None
    message: str = ""
    retry_after_s: float | None = None
    error_in_body: bool = False
    should_retry: bool | None = None
