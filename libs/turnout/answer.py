"""Answer: the HTTP response (status, headers, body) for a routed request.

Owns: Turnout's response headers (SPEC §7) and the OpenAI-format error body,
built from a `RouteResult` or a gateway-side error. Used by the worker (whose
answer the ingress replays) and by the ingress itself.
Must not import: services, FastAPI, arq, httpx.

Headers:
    x-request-id          the request's id (also the job id)
    x-turnout-provider    provider that served (or was tried last)
    x-turnout-model       model served (the provider's model name)
    x-turnout-attempts    attempts made
    x-turnout-fallback    1 when a fallback target served
    x-turnout-reroute     1 when a reroute model served
    x-turnout-byok-fallback  1 when the shared key served after the tenant's
                          own key was rejected (SPEC §6 credential fallback)
    x-turnout-plan-fallback  1 when a `plan_fallbacks` target served after a
                          quota / usage-cap failure (SPEC §10)
    x-turnout-strategy    the spend strategy rule whose model served (SPEC §10)
    x-turnout-comparable  1 when a comparable alternate served (`fallback.comparable`)
    retry-after           seconds, on 429 / 503
    x-should-retry        "false" after an exhausted chain (SDKs then do not
                          multiply the attempts already made)
    x-turnout-exhausted-answer  `last` or `original`: the error is that upstream
                          attempt's (`fallback.on_exhausted`)
    x-turnout-attempt-summary   with it, the per-attempt summary
                          (`turnout.core.exhausted.summary_header`)
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import msgspec

from turnout.core.exhausted import summary_header
from turnout.core.verdict import Served
from turnout.router import RouteResult

_json = msgspec.json.Encoder()


def error_body(
    message: str, *, error_type: str, code: str | None = None, param: str | None = None, **extra: Any
) -> bytes:
    """An OpenAI-format error body: `{"error": {"message","type","param","code", ...}}`."""
    return _json.encode({"error": {"message": message, "type": error_type, "param": param, "code": code, **extra}})


def header_text(value: str) -> str:
    """`value` fit for an HTTP header: as is when printable ASCII (RFC 9110 §5.5 field-value
    characters), else percent-encoded as UTF-8. Names are checked when written
    (`turnout.rules.text`); this is the last guard, so a name stored before that check
    can never turn an answer the provider already gave (and billed) into a 500."""
    if value.isascii() and value.isprintable():
        return value
    return quote(value, safe="".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%"))


def served_headers(served: Served, request_id: str) -> dict[str, str]:
    """The `x-turnout-*` and `x-request-id` headers for `served`."""
    headers = {"x-request-id": request_id, "x-turnout-attempts": str(served.attempts)}
    if served.provider is not None and served.model is not None:
        headers["x-turnout-provider"] = header_text(served.provider)
        headers["x-turnout-model"] = header_text(served.model)
        headers["x-turnout-fallback"] = "1" if served.fallback else "0"
        headers["x-turnout-reroute"] = "1" if served.reroute else "0"
        headers["x-turnout-byok-fallback"] = "1" if served.byok_fallback else "0"
        headers["x-turnout-plan-fallback"] = "1" if served.plan_fallback else "0"
        headers["x-turnout-comparable"] = "1" if served.comparable else "0"
        if served.strategy is not None:
            headers["x-turnout-strategy"] = header_text(served.strategy)
    return headers


def answer_of(result: RouteResult, request_id: str) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) for a routed request (SPEC §7).

    Success passes the provider's body through. An error carries the verdict's
    status, an OpenAI-format body with `attempts` (the per-attempt summary)
    and, where the verdict says so, `retry-after` and `x-should-retry`.
    """
    headers = served_headers(result.served, request_id)
    verdict = result.verdict
    if verdict is None:
        assert result.body is not None
        return 200, headers, result.body
    if verdict.retry_after_s is not None:
        headers["retry-after"] = str(verdict.retry_after_s)
    if verdict.should_retry is not None:
        headers["x-should-retry"] = "true" if verdict.should_retry else "false"
    if verdict.upstream is not None:  # the upstream attempt's own error; the summary goes in headers
        headers["x-turnout-exhausted-answer"] = verdict.upstream
        headers["x-turnout-attempt-summary"] = header_text(summary_header(result.records))
        body = error_body(verdict.message, error_type=verdict.error_type, code=verdict.error_code)
        return verdict.status_code, headers, body
    body = error_body(
        verdict.message,
        error_type=verdict.error_type,
        code=verdict.error_code,
        param=verdict.param,
        attempts=[msgspec.to_builtins(s) for s in verdict.summary],
    )
    return verdict.status_code, headers, body
