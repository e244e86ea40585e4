"""Continuation: rescue a committed stream that broke (policy `stream_recovery: continue`).

Owns: choosing where to continue a broken stream and asking for it. The
continuation request is the original messages plus one assistant message
holding exactly the text already delivered (an assistant prefill); it goes
to the same target first, then to the plan's other targets whose catalog
entry accepts a prefill, each as an ordinary recorded attempt of the one
attempt path (`Router.continue_stream`: the core's loop, admitted and
recorded like any other). A target that rejects the prefill (e.g. a 400)
or fails is passed over; when none commits, the caller ends the stream
with the *original* failure.
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from turnout.adapters.base import Upstream, Usage
from turnout.core.plan import Plan
from turnout.core.policy import Policy
from turnout.core.types import Target
from turnout.health import HealthView
from turnout.router import RequestInfo, Router, RouteResult

MAX_CONTINUATIONS = 3
"""How many times one client stream may be continued."""


def whole_answer_usage(continuation: Usage, delivered_tokens: int) -> Usage:
    """The usage the client is told after a continuation: the whole answer's.

    A continuation's own usage counts the prefill (the text delivered before
    the break) as prompt, and only the rest as completion. The client gets
    the answer as one: the prefill moves back to the completion side, so
    `prompt = own prompt - delivered`, `completion = delivered + own
    completion` (the total is unchanged). The attempts' records keep their
    own usage.

    Args:
        continuation: the continuation attempt's own usage, in tokens.
        delivered_tokens: tokens the client received before the (latest)
            break, estimated as one token per streamed content delta (what
            OpenAI-compatible providers send); a provider that packs more
            tokens into a delta makes this an undercount.

    Returns:
        The usage for the client's usage chunk, in tokens; never negative.
    """
    moved = min(max(delivered_tokens, 0), continuation.input_tokens)
    return Usage(input_tokens=continuation.input_tokens - moved, output_tokens=continuation.output_tokens + moved)


class Continuation:
    """Continues one request's broken stream (see module doc).

    Args:
        router: performs the attempts (admission, records, breaker).
        request: the request as sent upstream (OpenAI form, `stream: true`).
        plan: the request's plan (candidate targets, in order).
        view: the health view of the request.
        info: the request's identity.
        policy: the policy in force.
        upstream: the streaming adapter.
        supports_prefill: whether a target accepts an assistant prefill.
        first_number: the number the first continuation attempt gets.
    """

    def __init__(
        self,
        *,
        router: Router,
        request: dict[str, Any],
        plan: Plan,
        view: HealthView,
        info: RequestInfo,
        policy: Policy,
        upstream: Upstream,
        supports_prefill: Callable[[Target], bool],
        first_number: int,
    ) -> None:
        self._router = router
        self._request = request
        self._plan = plan
        self._view = view
        self._info = info
        self._policy = policy
        self._upstream = upstream
        self._supports_prefill = supports_prefill
        self._number = first_number
        self.used = 0

    def candidates(self, broken: Target) -> list[Target]:
        """The broken target first, then the plan's others; only prefill-capable ones."""
        ordered = [broken, *(e.target for e in self._plan.entries)]
        seen: set[str] = set()
        out = []
        for target in ordered:
            if target.key not in seen and self._supports_prefill(target):
                seen.add(target.key)
                out.append(target)
        return out

    async def resume(self, delivered_text: str, broken: Target) -> RouteResult | None:
        """A committed continuation of `delivered_text`, or None when no target gives one.

        Args:
            delivered_text: exactly the text the client has received.
            broken: the target whose stream broke.
        """
        if self.used >= MAX_CONTINUATIONS or not delivered_text:
            return None
        self.used += 1
        messages = [*self._request.get("messages", []), {"role": "assistant", "content": delivered_text}]
        request = {**self._request, "messages": messages}
        result, attempts = await self._router.continue_stream(
            request,
            plan=self._plan,
            targets=self.candidates(broken),
            first_number=self._number,
            info=self._info,
            view=self._view,
            policy=self._policy,
            upstream=self._upstream,
        )
        self._number += attempts
        return result if result is not None and result.stream is not None else None
