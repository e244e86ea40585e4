"""Default classification of one attempt's outcome (SPEC §3).

Owns: the SPEC §3 default classification rules (`classify`), the
FailureKind → Disposition table and the set of kinds that count against
provider health. The provider error wording and envelope tables the rules
read are `turnout.core.wording`; the status a policy's status lists match is
`turnout.core.status_lists`. Their public names are importable from here too.

Must not import: anything outside the standard library, msgspec and
`turnout.core`; no I/O, no clock, no randomness, no asyncio.

Sources of the rules: SPEC §3 "Default classification" (the table and its notes);
the providers' codes, types and wordings are listed in `turnout.core.wording`.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Final

from turnout.core.status_lists import (
    SERVER_ERROR_STATUSES,
    StatusSet,
    int_status,
    is_2xx,
    status_for_lists,
    status_matches,
    status_set,
)
from turnout.core.types import Disposition, FailureKind, Outcome, TransportError
from turnout.core.wording import (
    CONTENT_POLICY_WORDING,
    CONTEXT_LENGTH_WORDING,
    OVERLOAD_WORDING,
    RATE_LIMIT_WORDING,
    TRANSPORT_KIND,
    envelope_status,
    kind_from_message,
    normalise,
    speaks_of_quota,
    transport_kind_from_message,
)

__all__ = [
    "COUNTS_AGAINST_HEALTH",
    "DISPOSITION",
    "StatusSet",
    "classify",
    "counts_against_health",
    "disposition",
    "envelope_status",
    "kind_from_message",
    "status_for_lists",
    "status_matches",
    "status_set",
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


def _google_rate_limit(status: int, outcome: Outcome) -> bool:
    """A Google API's 429 `RESOURCE_EXHAUSTED` that says when to come back (a `RetryInfo` delay):
    a per-minute quota, so a rate limit whatever its wording ("You exceeded your current quota"
    is how Gemini words every rate limit; https://ai.google.dev/gemini-api/docs/rate-limits)."""
    return status == 429 and outcome.retry_after_s is not None and normalise(outcome.error_code) == "resource exhausted"


def _classify_status(status: int, outcome: Outcome) -> FailureKind:
    """SPEC §3 table for an outcome that carries (or stands for) an error status."""
    if _google_rate_limit(status, outcome):
        return FailureKind.RATE_LIMITED
    if status == 402 or speaks_of_quota(outcome):
        return FailureKind.QUOTA_EXHAUSTED
    haystack = normalise(outcome.message, outcome.error_type, outcome.error_code)
    if status == 429:
        return FailureKind.RATE_LIMITED
    if status == 401:
        return FailureKind.AUTH
    if status == 403:
        if RATE_LIMIT_WORDING.search(haystack) or OVERLOAD_WORDING.search(haystack):
            return FailureKind.RATE_LIMITED
        if CONTENT_POLICY_WORDING.search(haystack):
            return FailureKind.CONTENT_POLICY
        return FailureKind.AUTH
    if status == 408:
        return FailureKind.TIMEOUT
    if 400 <= status < 500:
        if CONTEXT_LENGTH_WORDING.search(haystack):
            return FailureKind.CONTEXT_LENGTH
        if CONTENT_POLICY_WORDING.search(haystack):
            return FailureKind.CONTENT_POLICY
        return FailureKind.CLIENT_ERROR
    if status in SERVER_ERROR_STATUSES:
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
    status = int_status(outcome.status)
    if status is None or is_2xx(status):
        if outcome.error_in_body:
            return _classify_status(envelope_status(outcome.error_type, outcome.error_code), outcome)
        transport = outcome.transport
        if isinstance(transport, TransportError):
            return TRANSPORT_KIND[transport]
        if status is not None:
            return FailureKind.SUCCESS
        if speaks_of_quota(outcome):
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
