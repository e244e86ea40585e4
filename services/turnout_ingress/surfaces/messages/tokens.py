"""`POST /v1/messages/count_tokens`: Anthropic's token count, from the provider or estimated.

Owns: counting a Messages body's input tokens. When an offer of the model
is served by a provider whose API counts tokens (`turnout.adapters.token_counts`:
`anthropic`, `gemini`, `vertex`, `bedrock`) with a credential the caller's `key_mode`
lets it use (`turnout.tenancy.byok.resolve_call`, as its model calls choose: its
own key, the platform key, or none — an `own_only` key with a key of its own
for the model never reaches the platform key; a tenant custom endpoint is
never asked), that provider's own count answers (the Anthropic API's
count_tokens; Gemini's and Vertex AI's `countTokens`, Claude on Vertex AI's
`count-tokens:rawPredict`; Bedrock's `CountTokens`; the body translated as a
chat request to that provider would be, by the family's module) — offers in
plan order; the first that answers wins. Otherwise — no such offer, or none
answered within `UPSTREAM_TIMEOUT_S` — the count is an estimate: one token
per `CHARS_PER_TOKEN` characters of the text the model would read (system
prompt, message text, tool inputs and results, tool definitions), rounded up,
at least 1. The answer says which in `x-turnout-count-source` (`provider`
or `estimate`). An offer whose chat breaker rests (`resting`) is not asked;
each count call is gated by, and counted for, a breaker of its own per
(provider, model, operation) and written as an attempt record
(`count_attempts`: a failing count endpoint never opens chat).

Not charged to `tpm`: a count uses no model tokens (the providers' count
endpoints are free and limited apart from their model calls), so charging
its input tokens would make a client that counts before it sends pay its
prompt twice against `tpm`; the count route's own `rpm` counter bounds how
often a key may count (`Limiter.admit_count`).
Must not import: `turnout_ingress.app`.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from turnout.adapters.chat_parts import WireError
from turnout.adapters.token_counts import COUNTING_KINDS, count_spec, provider_count
from turnout.core.plan import PlanEntry
from turnout.tenancy.byok import ResolvedCall, resolve_call
from turnout.tenancy.identity import Identity
from turnout_ingress.surfaces.messages.count_attempts import CountCall
from turnout_ingress.surfaces.messages.wire import to_openai_request

if TYPE_CHECKING:
    from turnout.core.plan import Plan
    from turnout.health import HealthView
    from turnout_ingress.state import IngressState

CHARS_PER_TOKEN = 4
"""Characters per token of the estimate (English prose averages about four)."""
UPSTREAM_TIMEOUT_S = 10.0
"""How long one provider's count may take, seconds."""


def _texts(value: Any) -> list[str]:
    """Every string a content value holds (a string, blocks, tool inputs and results)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for item in value for t in _texts(item)]
    if isinstance(value, dict):
        out: list[str] = []
        for key, item in value.items():
            if key in ("type", "id", "tool_use_id", "cache_control"):
                continue
            out.extend(_texts(item) if key != "input" else [json.dumps(item)])
        return out
    return []


def estimate_input_tokens(body: dict[str, Any]) -> int:
    """The estimate of the module doc for an Anthropic Messages body, in tokens (>= 1)."""
    parts = _texts(body.get("system")) + [
        t for m in body.get("messages", []) if isinstance(m, dict) for t in _texts(m.get("content"))
    ]
    if body.get("tools"):
        parts.append(json.dumps(body["tools"]))
    return max(1, math.ceil(sum(len(p) for p in parts) / CHARS_PER_TOKEN))


def resting(view: HealthView | None, target: str) -> bool:
    """True when `target`'s breaker keeps calls off it now: tripped (OPEN, or HALF_OPEN, whose
    one probe is a model call's, SPEC §5) or inside a provider's Retry-After. A count is never
    a probe, and its outcome is not counted: counting is not a model call."""
    if view is None or view.degraded:
        return False
    snap = view.snapshot(target)
    return snap.open or snap.not_before_s > view.store_now()


async def count_input_tokens(
    state: IngressState,
    plan: Plan,
    body: dict[str, Any],
    identity: Identity,
    view: HealthView | None = None,
    request_id: str = "",
) -> tuple[int, str | None]:
    """The input tokens of `body`, and the provider that counted them (None: estimated).

    Args:
        plan: the request's plan (offers in order; its `key_mode` chooses each offer's key).
        body: the checked Anthropic Messages body (without `stream`).
        identity: the caller (its org's own keys, its policy).
        view: the health read the plan was made with: an offer whose breaker rests is skipped.
        request_id: the request's id (its count attempts' records).
    """
    tried: set[str] = set()
    tenant = state.keyring.credentials(identity.org)
    try:
        request: dict[str, Any] | None = to_openai_request({**body, "max_tokens": 1})
    except WireError:
        request = None  # only the Anthropic-speaking APIs can count it
    offers: list[tuple[PlanEntry, ResolvedCall]] = []
    for entry in plan.entries:
        target = entry.target
        call = resolve_call(state.catalog, tenant, target, key_mode=plan.key_mode, policy=identity.policy)
        if call is None or call.custom or resting(view, target.key):
            continue
        if call.provider.kind not in COUNTING_KINDS or target.key in tried:
            continue
        tried.add(target.key)
        offers.append((entry, call))
    if not offers:
        return estimate_input_tokens(body), None
    calls = CountCall(state, identity, request_id, str(body.get("model", "")))
    count_view = await calls.view([entry for entry, _ in offers])
    for entry, call in offers:
        gate = await calls.admit(entry, count_view)
        if not gate.admitted:
            continue
        spec = count_spec(call.provider, entry.target, timeout_s=UPSTREAM_TIMEOUT_S, request_id=request_id)
        attempt = await provider_count(state.http, spec, body, request)
        await calls.ended(entry, call, attempt, count_view, gate.probe_token)
        if attempt.tokens is not None:
            return attempt.tokens, entry.target.provider
    return estimate_input_tokens(body), None
