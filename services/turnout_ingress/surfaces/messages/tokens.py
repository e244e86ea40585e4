"""`POST /v1/messages/count_tokens`: Anthropic's token count, from the provider or estimated.

Owns: counting a Messages body's input tokens. When an offer of the model
is served by an `anthropic` provider with a key the caller's `key_mode` lets
it use (`turnout.tenancy.byok.resolve_call`, as its model calls choose: its
own key, the platform key, or none — an `own_only` key with a key of its own
for the model never reaches the platform key; a tenant custom endpoint is
never asked), that provider's
own `POST {base_url}/v1/messages/count_tokens` answers, and for a `gemini`
provider the Gemini API's `POST {base_url}/v1beta/models/{model}:countTokens`
(`{"totalTokens": N}`; the body translated as a chat request to that
provider would be: `turnout.adapters.gemini.count_tokens_call`) — offers in
plan order; the first that answers wins. Otherwise — no such offer, or none
answered within `UPSTREAM_TIMEOUT_S` — the count is an estimate: one token
per `CHARS_PER_TOKEN` characters of the text the model would read (system
prompt, message text, tool inputs and results, tool definitions), rounded up,
at least 1. The answer says which in `x-turnout-count-source` (`provider`
or `estimate`). An offer whose breaker rests (`resting`) is not asked; no
attempt is recorded and no breaker counts a count: counting is not a model
call.
Must not import: `turnout_ingress.app`.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import httpx

from turnout.adapters.anthropic_wire import ANTHROPIC_VERSION, MESSAGES_PATH
from turnout.adapters.gemini import count_tokens_call
from turnout.tenancy.byok import resolve_call
from turnout.tenancy.identity import Identity
from turnout_ingress.surfaces.messages.wire import to_openai_request

if TYPE_CHECKING:
    from turnout.core.plan import Plan
    from turnout.health import HealthView
    from turnout_ingress.state import IngressState

CHARS_PER_TOKEN = 4
"""Characters per token of the estimate (English prose averages about four)."""
UPSTREAM_TIMEOUT_S = 10.0
"""How long one provider's count may take, seconds."""
COUNT_PATH = MESSAGES_PATH + "/count_tokens"
COUNTING_KINDS = ("anthropic", "gemini")
"""The provider kinds whose API counts tokens (asked with a platform key)."""


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
    state: IngressState, plan: Plan, body: dict[str, Any], identity: Identity, view: HealthView | None = None
) -> tuple[int, str | None]:
    """The input tokens of `body`, and the provider that counted them (None: estimated).

    Args:
        plan: the request's plan (offers in order; its `key_mode` chooses each offer's key).
        body: the checked Anthropic Messages body (without `stream`).
        identity: the caller (its org's own keys, its policy).
        view: the health read the plan was made with: an offer whose breaker rests is skipped.
    """
    tried: set[str] = set()
    tenant = state.keyring.credentials(identity.org)
    for entry in plan.entries:
        target = entry.target
        call = resolve_call(state.catalog, tenant, target, key_mode=plan.key_mode, policy=identity.policy)
        if call is None or call.custom or resting(view, target.key):
            continue
        provider = call.provider
        if provider.kind not in COUNTING_KINDS or not provider.api_key or target.key in tried:
            continue
        tried.add(target.key)
        model_body = {**body, "model": target.model}
        if provider.kind == "gemini":
            counted = await _ask_gemini(state.http, provider.base_url, provider.api_key, model_body)
        else:
            counted = await _ask(state.http, provider.base_url, provider.api_key, model_body)
        if counted is not None:
            return counted, target.provider
    return estimate_input_tokens(body), None


async def _ask(http: httpx.AsyncClient, base_url: str, api_key: str, body: dict[str, Any]) -> int | None:
    """One provider's count, or None (any failure: the caller estimates)."""
    try:
        response = await http.post(
            base_url.rstrip("/") + COUNT_PATH,
            json={k: v for k, v in body.items() if k not in ("stream", "max_tokens")},
            headers={"x-api-key": api_key, "anthropic-version": ANTHROPIC_VERSION},
            timeout=UPSTREAM_TIMEOUT_S,
        )
        count = response.json().get("input_tokens") if response.status_code == 200 else None
    except Exception:  # noqa: BLE001 - any failure (httpx's, the aiohttp transport's, a bad body): estimate
        return None
    return _counted(count)


async def _ask_gemini(http: httpx.AsyncClient, base_url: str, api_key: str, body: dict[str, Any]) -> int | None:
    """A Gemini provider's count of a Messages `body` (its `model` the offer's), or None (any
    failure, a body Gemini cannot express included: the caller goes on)."""
    try:
        path, payload = count_tokens_call(body["model"], to_openai_request({**body, "max_tokens": 1}))
        response = await http.post(
            base_url.rstrip("/") + path, json=payload, headers={"x-goog-api-key": api_key}, timeout=UPSTREAM_TIMEOUT_S
        )
        count = response.json().get("totalTokens") if response.status_code == 200 else None
    except Exception:  # noqa: BLE001 - any failure (a WireError, httpx's, the transport's, a bad body): go on
        return None
    return _counted(count)


def _counted(count: Any) -> int | None:
    """A provider's count when it is a whole number of tokens (>= 0), else None."""
    return count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else None
