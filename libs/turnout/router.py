"""The shell: the one async attempt loop that performs the core's decisions.

Owns: composing the pure core (plan, loop, verdict) with the edges (the
upstream adapter, an injected clock and sleep, the RNG), and producing one
`RouteResult` per request. It is the only loop; every decision it performs
comes from `turnout.core`.
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import httpx
import msgspec

from turnout.adapters.openai_chat import AttemptResult, call_chat, upstream_body
from turnout.catalog import Catalog
from turnout.core.breaker import BreakerSettings
from turnout.core.loop import (
    AttemptRecord, Dispatch, GiveUp, LoopState, SkipReason, StopReason, Wait, begin, next_step, on_outcome, on_skip,
)
from turnout.core.plan import Plan, RoutingSettings, build_plan
from turnout.core.policy import Policy
from turnout.core.types import FailureKind
from turnout.core.verdict import Served, Verdict, conclude, served_facts
from turnout.health import Breakers, HealthView
from turnout.state.breaker_store import MemoryBreakerStore


class Clock(Protocol):
    """Monotonic seconds for in-process deadlines."""

    def __call__(self) -> float: ...


Sleep = Callable[[float], Awaitable[None]]


class RouteResult(msgspec.Struct, frozen=True, kw_only=True):
    """The answer to one request.

    Attributes:
        body: the upstream body on success, else None.
        verdict: the error answer when not served, else None.
        served: facts for the `x-turnout-*` headers.
        records: every attempt's decision record.
    """

    body: bytes | None
    verdict: Verdict | None
    served: Served
    records: tuple[AttemptRecord, ...]


class Router:
    """Runs the attempt loop of SPEC §3 for non-streaming chat completions.

    Args:
        catalog: models, offers and providers.
        http: the process's shared upstream client.
        breakers: fleet-wide breakers and health (default: in-memory, for
            one process and tests).
        clock: monotonic seconds (injected for tests).
        sleep: waits a number of seconds (injected for tests).
        rng: jitter and tie-break source.
    """

    def __init__(
        self,
        *,
        catalog: Catalog,
        http: httpx.AsyncClient,
        breakers: Breakers | None = None,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self._catalog = catalog
        self._http = http
        self._breakers = breakers or Breakers(MemoryBreakerStore(), BreakerSettings())
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()

    def _build(self, model: str, settings: RoutingSettings, policy: Policy, rates: dict[str, float]) -> Plan:
        return build_plan(
            model,
            catalog=self._catalog.models,
            providers=self._catalog.provider_names,
            settings=settings,
            policy=policy,
            success_rate=rates,
            rng=self._rng,
            priority_models=self._catalog.priority_models,
        )

    async def plan(self, model: str, settings: RoutingSettings, policy: Policy) -> tuple[Plan, HealthView]:
        """The plan for `model`, its offers ordered by shared health (SPEC §5).

        Returns:
            The plan and the health view it was ordered by (reused for
            admissions).

        Raises:
            turnout.core.plan.UnknownModel: no such model.
            GatewayUnavailable: the breaker store is down under policy `fail`.
        """
        draft = self._build(model, settings, policy, {})
        view = await self._breakers.view(plan_targets(draft))
        rates = view.success_rates()
        return (self._build(model, settings, policy, rates) if rates else draft), view

    async def route(
        self,
        request: dict[str, Any],
        *,
        plan: Plan,
        view: HealthView,
        policy: Policy,
        time_left_s: float,
        request_id: str,
    ) -> RouteResult:
        """Serve one chat completion request through the attempt loop.

        Args:
            request: the client's JSON body (decoded).
            plan: from `plan()`.
            view: the health view from `plan()`.
            policy: the clamped policy in force.
            time_left_s: seconds until the client's deadline.
            request_id: Turnout's request id (sent upstream, recorded).

        Returns:
            A `RouteResult`. Cancellation (client gone) propagates after the
            in-flight upstream call is cancelled.
        """
        now = self._clock()
        state = begin(plan, policy, deadline_s=now + time_left_s)
        success: AttemptResult | None = None
        while True:
            step = next_step(state, self._clock())
            if isinstance(step, GiveUp):
                break
            if isinstance(step, Wait):
                await self._sleep(step.delay_s)
                continue
            state, result = await self._attempt(state, step, request, request_id, view)
            if result is not None and state.stop is StopReason.SERVED:
                success = result
        return self._result(state, step.reason, success)

    async def _attempt(
        self, state: LoopState, step: Dispatch, request: dict[str, Any], request_id: str, view: HealthView
    ) -> tuple[LoopState, AttemptResult | None]:
        target = step.entry.target
        provider = self._catalog.providers[target.provider]
        if not provider.api_key:
            return on_skip(state, step, reason=SkipReason.NO_CREDENTIAL, reopen_in_s=None, now_s=self._clock()), None
        gate = await self._breakers.admit(target.key, view)
        if not gate.admitted:
            return on_skip(
                state, step, reason=SkipReason.CIRCUIT_OPEN, reopen_in_s=gate.reopen_in_s, now_s=self._clock()
            ), None
        started = self._clock()
        try:
            result = await call_chat(
                self._http,
                base_url=provider.base_url,
                api_key=provider.api_key,
                body=upstream_body(request, target),
                timeout_s=step.timeout_s,
                request_id=request_id,
            )
        except asyncio.CancelledError:
            await asyncio.shield(self._breakers.record(
                target.key, FailureKind.CANCELLED, probe=gate.probe, error="", view=view
            ))
            raise
        state = on_outcome(state, step, result.outcome, started_s=started, now_s=self._clock(), rng=self._rng)
        record = state.records[-1]
        await self._breakers.record(
            target.key, record.kind, probe=gate.probe, error=_error_text(record.status, record.message), view=view
        )
        return state, result

    @staticmethod
    def _result(state: LoopState, reason: StopReason, success: AttemptResult | None) -> RouteResult:
        if reason is StopReason.SERVED and success is not None:
            return RouteResult(body=success.body, verdict=None, served=served_facts(state), records=state.records)
        verdict = conclude(state, reason)
        return RouteResult(body=None, verdict=verdict, served=verdict.served, records=state.records)



def plan_targets(plan: Plan) -> list[str]:
    """Every target key a plan may attempt (main sequence and special lists)."""
    return [e.target.key for e in (*plan.entries, *plan.context_window, *plan.content_policy)]


def _error_text(status: int | None, message: str) -> str:
    return f"{status if status is not None else 'no status'}: {message}"[:200]
