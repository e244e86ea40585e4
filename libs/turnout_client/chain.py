"""The client-side model chain and the per-call Idempotency-Key: decisions, no I/O.

Owns: which request to send next for one logical call, given the answers so
far. The transports (`turnout_client.transport`) perform the sends; this
module only looks at requests and answers, so the sync and async transports
share it. Must not import: `turnout` or any service package.

Rules:

- **Idempotency-Key.** A POST without one gets a fresh key (a random UUID4
  hex by default). A retry the SDK makes of the same logical call (the
  official `openai` and `anthropic` SDKs number their attempts in
  `x-stainless-retry-count`; a retry has a count above 0 and the same
  method, URL and body) gets the *same* key, so the gateway replays the
  first answer instead of paying twice. The last key is kept in a context
  variable: one per thread and per asyncio task, so concurrent calls never
  share one.
- **Model chain.** When the gateway says its whole chain is exhausted (an
  answer of the attempt loop — it carries `x-turnout-attempts` — with
  status 429, 502, 503 or 504, or an exhausted answer in the upstream's own
  status, `x-turnout-exhausted-answer`), the same request is sent once with the next
  model of the caller's chain (its own key: `<key>.<n>`). The chain never
  re-sends a model: the gateway has already retried and fallen back (that is
  what `x-should-retry: false` says), so the client only adds *different*
  models and never multiplies the gateway's attempts. When every model is
  exhausted the caller gets the answer of its own model (the original
  error), with its `x-should-retry` and `Retry-After`, which the SDK honours
  as usual.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

ModelChain = Mapping[str, Sequence[str]] | Sequence[str]
"""Models to try, in order, after the requested one is exhausted: by
requested model (`"*"` for any model), or one list for every model."""

IDEMPOTENCY_HEADER = "idempotency-key"
RETRY_COUNT_HEADER = "x-stainless-retry-count"


def chain_models(chain: ModelChain | None, model: str) -> list[str]:
    """The chain after `model`: its entry (else the `"*"` entry), without `model` itself or repeats."""
    if chain is None:
        return []
    listed = (chain.get(model) or chain.get("*") or ()) if isinstance(chain, Mapping) else chain
    out: list[str] = []
    for name in listed:
        if name != model and name not in out:
            out.append(name)
    return out


def json_body(content: bytes) -> dict[str, Any] | None:
    """The request body as a JSON object, or None (not JSON, not an object)."""
    try:
        body = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return None
    return body if isinstance(body, dict) else None


class IdempotencyKeys:
    """One Idempotency-Key per logical call (module doc).

    Args:
        new_key: makes a fresh key (injected by tests; default UUID4 hex).
    """

    def __init__(self, new_key: Callable[[], str] = lambda: uuid.uuid4().hex) -> None:
        self._new_key = new_key
        self._last: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
            "turnout_client_idempotency", default=None
        )

    def key_for(self, method: str, url: str, headers: Mapping[str, str], content: bytes) -> str | None:
        """The key to add to this request, or None (not a POST, or the caller set one)."""
        if method.upper() != "POST" or IDEMPOTENCY_HEADER in headers:
            return None
        fingerprint = hashlib.sha256(method.encode() + b" " + url.encode() + b"\n" + content).hexdigest()
        try:
            retry = int(headers.get(RETRY_COUNT_HEADER, "0") or 0)
        except ValueError:
            retry = 0
        last = self._last.get()
        if retry > 0 and last is not None and last[1] == fingerprint:
            return last[0]
        key = self._new_key()
        self._last.set((key, fingerprint))
        return key


class Step:
    """A request to send: its body (None: unchanged), the model it asks for, its chain position, its key."""

    __slots__ = ("content", "index", "key", "model")

    def __init__(self, content: bytes | None, model: str | None, index: int, key: str | None) -> None:
        self.content, self.model, self.index, self.key = content, model, index, key


def plan_steps(content: bytes, key: str | None, chain: ModelChain | None) -> list[Step]:
    """The requests one logical call may send: the caller's own, then one per chain model.

    Args:
        content: the caller's request body.
        key: the caller's Idempotency-Key (given or added), or None.
        chain: the caller's model chain.

    Returns:
        At least one step; only one when the body names no model or the
        chain has nothing after it.
    """
    body = json_body(content) if chain is not None else None  # without a chain, the body is never parsed
    model = body.get("model") if body is not None else None
    if body is None or not isinstance(model, str):
        return [Step(None, None, 0, key)]
    steps = [Step(None, model, 0, key)]
    for index, name in enumerate(chain_models(chain, model), start=1):
        steps.append(
            Step(json.dumps({**body, "model": name}).encode(), name, index, None if key is None else f"{key}.{index}")
        )
    return steps
