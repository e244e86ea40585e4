"""The routing facts a Turnout gateway puts on every answer, as one typed event.

Owns: reading the `x-turnout-*`, `x-request-id`, `x-should-retry` and
`Retry-After` response headers into a `GatewayRouting`. Pure: no I/O, no
clock. Must not import: `turnout` or any service package (this package is
installed on the caller's side, with the `[client]` extra only).

Header meanings (the gateway's README, "What the client sees"):

    x-request-id               the gateway's request id
    x-turnout-provider         provider that served (or was tried last)
    x-turnout-model            the provider's model name that served
    x-turnout-attempts         upstream attempts the gateway made (>= 0)
    x-turnout-fallback         1 when a fallback target served
    x-turnout-reroute          1 when a reroute model served
    x-turnout-byok-fallback    1 when the platform key served after the
                               caller's own key was rejected
    x-turnout-plan-fallback    1 when a `plan_fallbacks` model served after
                               a quota or usage-cap failure
    x-turnout-comparable       1 when a comparable alternate (a model of the
                               requested model's class) served
    x-turnout-strategy         the routing strategy in force, when one is
    x-turnout-idempotent-replay  1 when the answer is a replay of an
                               earlier request with the same Idempotency-Key
    x-turnout-exhausted-answer `last` or `original`: every attempt failed and
                               the error is that upstream attempt's own
                               (`policy.fallback.on_exhausted`)
    x-turnout-attempt-summary  with it, one `<n> <provider>/<model> <status>
                               <kind> <ms>ms` entry per attempt
    x-should-retry             "false": the gateway already retried and fell
                               back; a client retry would multiply attempts
    Retry-After                delta-seconds (RFC 9110 §10.2.3)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

EXHAUSTED_STATUSES = frozenset({429, 502, 503, 504})
"""Statuses with which the gateway answers when its whole chain failed
(every provider rate limiting, `provider_failed`, `circuit_open`,
`budget_exhausted`)."""


@dataclass(frozen=True, kw_only=True)
class GatewayRouting:
    """How the gateway routed one HTTP answer.

    Attributes:
        status: the HTTP status of the answer.
        request_id: `x-request-id`, None when absent.
        provider / model: who served (or was tried last); None when no
            attempt was made.
        attempts: upstream attempts the gateway made; None when the answer
            did not come from the attempt loop (auth, validation, overload).
        fallback / reroute / byok_fallback / plan_fallback: the gateway's
            flags (`plan_fallback`: a `plan_fallbacks` model served after a
            quota or usage-cap failure).
        comparable: a comparable alternate served (`fallback.comparable`).
        strategy: the routing strategy named by the gateway, None when none.
        idempotent_replay: the answer replays an earlier identical request.
        exhausted_answer: `last` / `original` when every attempt failed and
            the answer is that upstream attempt's own status and error
            (`policy.fallback.on_exhausted`), else None.
        attempt_summary: `x-turnout-attempt-summary` (sent with
            `exhausted_answer`), else None.
        should_retry: `x-should-retry` as a bool, None when absent.
        retry_after_s: `Retry-After` in seconds (delta-seconds form only),
            None when absent or not a number.
        requested_model: the model this HTTP request asked for (as sent;
            with a client-side model chain, the chain's model); None without
            a chain (the body is then never parsed).
        chain_index: 0 for the caller's own model, n for the n-th model of
            the client-side chain.
        error_code: the body's `error.code` where the transport read it (an
            error answer that may end a chain), else None.
    """

    status: int
    request_id: str | None
    provider: str | None
    model: str | None
    attempts: int | None
    fallback: bool
    reroute: bool
    byok_fallback: bool
    plan_fallback: bool
    strategy: str | None
    idempotent_replay: bool
    exhausted_answer: str | None
    attempt_summary: str | None
    should_retry: bool | None
    retry_after_s: float | None
    requested_model: str | None = None
    chain_index: int = 0
    comparable: bool = False
    error_code: str | None = None

    @property
    def chain_exhausted(self) -> bool:
        """No target of the model could serve: the attempt loop ran and failed
        (the answer carries `x-turnout-attempts`), or every target is out of
        rotation (`circuit_open`, refused before any attempt). An exhausted
        answer in the upstream's own status (`exhausted_answer` set) counts
        whatever that status is."""
        if self.exhausted_answer is not None and self.attempts is not None:
            return True
        if self.status not in EXHAUSTED_STATUSES:
            return False
        return self.attempts is not None or self.error_code == "circuit_open"

    def as_attributes(self) -> dict[str, str | int | float | bool]:
        """Flat `turnout.*` attributes (None fields left out), e.g. for a span."""
        fields = {
            "turnout.request_id": self.request_id,
            "turnout.provider": self.provider,
            "turnout.model": self.model,
            "turnout.attempts": self.attempts,
            "turnout.fallback": self.fallback,
            "turnout.reroute": self.reroute,
            "turnout.byok_fallback": self.byok_fallback,
            "turnout.plan_fallback": self.plan_fallback,
            "turnout.comparable": self.comparable,
            "turnout.strategy": self.strategy,
            "turnout.idempotent_replay": self.idempotent_replay,
            "turnout.exhausted_answer": self.exhausted_answer,
            "turnout.should_retry": self.should_retry,
            "turnout.retry_after_s": self.retry_after_s,
            "turnout.requested_model": self.requested_model,
            "turnout.chain_index": self.chain_index,
            "turnout.error_code": self.error_code,
            "http.response.status_code": self.status,
        }
        return {k: v for k, v in fields.items() if v is not None}


def _flag(headers: Mapping[str, str], name: str) -> bool:
    return headers.get(name, "0").strip() in ("1", "true")


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None


def _seconds(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None  # the HTTP-date form: the gateway never sends it
    return seconds if seconds >= 0 else None


def parse_routing(
    status: int,
    headers: Mapping[str, str],
    *,
    requested_model: str | None = None,
    chain_index: int = 0,
    error_code: str | None = None,
) -> GatewayRouting:
    """The `GatewayRouting` of one answer.

    Args:
        status: the HTTP status.
        headers: the response headers; a case-insensitive mapping (httpx's
            `Headers`) or one with lower-case names.
        requested_model: the model the request asked for, when known.
        chain_index: the position of that model in the client-side chain.
        error_code: the error body's `error.code`, when read.

    Returns:
        The event; headers that are absent or malformed read as None / False.
        Never raises.
    """
    should = headers.get("x-should-retry")
    return GatewayRouting(
        status=status,
        request_id=headers.get("x-request-id"),
        provider=headers.get("x-turnout-provider"),
        model=headers.get("x-turnout-model"),
        attempts=_int(headers.get("x-turnout-attempts")),
        fallback=_flag(headers, "x-turnout-fallback"),
        reroute=_flag(headers, "x-turnout-reroute"),
        byok_fallback=_flag(headers, "x-turnout-byok-fallback"),
        plan_fallback=_flag(headers, "x-turnout-plan-fallback"),
        comparable=_flag(headers, "x-turnout-comparable"),
        strategy=headers.get("x-turnout-strategy"),
        idempotent_replay=_flag(headers, "x-turnout-idempotent-replay"),
        exhausted_answer=headers.get("x-turnout-exhausted-answer"),
        attempt_summary=headers.get("x-turnout-attempt-summary"),
        should_retry=None if should is None else should.strip().lower() == "true",
        retry_after_s=_seconds(headers.get("retry-after")),
        requested_model=requested_model,
        chain_index=chain_index,
        error_code=error_code,
    )


def error_code_of(content: bytes) -> str | None:
    """`error.code` of an error body (the OpenAI and the Anthropic shapes both carry it), or None."""
    try:
        body = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return None
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


def routing_of(response: object) -> GatewayRouting | None:
    """The routing event of a response the SDK returned.

    Accepts an httpx / httpx2 response, or an SDK raw response
    (`client.chat.completions.with_raw_response.create(...)`,
    `.with_streaming_response`), whose `http_response` is one. The event the
    transport stored is returned (it knows the chain position); otherwise it
    is parsed from the headers.

    Returns:
        The event, or None when `response` carries no headers.
    """
    http = getattr(response, "http_response", response)
    extensions = getattr(http, "extensions", None)
    if isinstance(extensions, Mapping) and isinstance(extensions.get(EXTENSION), GatewayRouting):
        return extensions[EXTENSION]  # type: ignore[no-any-return]
    headers = getattr(http, "headers", None)
    status = getattr(http, "status_code", None)
    if headers is None or not isinstance(status, int):
        return None
    return parse_routing(status, headers)


EXTENSION = "turnout.routing"
"""The key of the event in `response.extensions`."""
