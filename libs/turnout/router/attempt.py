"""One attempt: performing a `Dispatch` the loop asked for (SPEC §3 step 3, §5, §6).

Owns: everything between the core's `Dispatch` and its outcome fed back to the loop. It
resolves the provider and credential, reads the attempt's gates and performs the core's one
`Admission` decision (`turnout.core.admission`): a refusal goes back to the loop with no
attempt made; an admitted attempt is sent through the upstream adapter, its texts scrubbed,
its outcome fed to `on_outcome` and recorded (`turnout.router.recording`). A client that
leaves mid-call records the attempt as cancelled. The loop (`turnout.router.Router`) and a
stream's continuation both come here: there is one attempt path.
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import httpx
import msgspec

from turnout.adapters.base import AttemptResult, CallSpec, Refusal, Upstream, upstream_body
from turnout.adapters.families import family_for
from turnout.adapters.specs import provider_call
from turnout.catalog import Catalog
from turnout.config import OfferApi, ProviderConfig
from turnout.core.admission import BreakerAnswer, Gates, Unsupported, admission, on_refused
from turnout.core.credentials import Credential
from turnout.core.loop import Dispatch, LoopState, SkipReason, on_outcome
from turnout.core.native import CHAT, Native, native_body
from turnout.core.policy import Policy
from turnout.core.scopes import KeyMode
from turnout.core.types import FailureKind, Outcome, Target
from turnout.health import Breakers, Gate, HealthView, credential_subject, plan_cap_scope
from turnout.router.after_answer import later
from turnout.router.recording import Recorder
from turnout.router.request import Clock, RequestInfo
from turnout.scrub import Scrubber
from turnout.tenancy.byok import CredentialSource, ResolvedCall, resolve_call


@dataclass(frozen=True, slots=True)
class Success:
    """A served attempt, as the answer needs it.

    Attributes:
        result: what the upstream adapter returned (a JSON body, or a committed stream).
        probe_token: the HALF_OPEN probe permit the attempt held, or None.
        handle: the observer's handle for the attempt (`RouteObserver.attempt_started`).
        call: the provider and credential it was sent with.
    """

    result: AttemptResult
    probe_token: str | None
    handle: object
    call: ResolvedCall


@dataclass(frozen=True, slots=True)
class Attempt:
    """One dispatch of one request, with what performing it needs.

    Attributes:
        catalog: the request's catalog snapshot (providers, offers' APIs).
        request: the client's OpenAI request (decoded JSON).
        info: the request's identity.
        view: the request's health view.
        upstream: the adapter to call.
        native: the client's own request on another surface, or None (`Router.route`).
    """

    catalog: Catalog
    request: dict[str, Any]
    info: RequestInfo
    view: HealthView
    upstream: Upstream
    native: Native | None = None


class Attempts:
    """Performs the loop's dispatches (see module doc).

    Args:
        http: the shared upstream client.
        custom_http: the SSRF-guarded client for tenant custom endpoints, or None (never called).
        breakers: the fleet-wide breakers and health.
        recorder: ends attempts (observer and breakers).
        clock: monotonic seconds.
        rng: jitter source for a retry's backoff.
        credentials: tenants' own keys and custom endpoints, or None.
        scrubber: the egress scrubber.
        paused: called just before each upstream call (`Router`).
    """

    def __init__(
        self,
        *,
        http: httpx.AsyncClient,
        custom_http: httpx.AsyncClient | None,
        breakers: Breakers,
        recorder: Recorder,
        clock: Clock,
        rng: random.Random,
        credentials: CredentialSource | None,
        scrubber: Scrubber,
        paused: Callable[[], None],
    ) -> None:
        self._http = http
        self._custom_http = custom_http
        self._breakers = breakers
        self._recorder = recorder
        self._clock = clock
        self._rng = rng
        self._credentials = credentials
        self._scrubber = scrubber
        self._paused = paused

    async def perform(self, state: LoopState, step: Dispatch, attempt: Attempt) -> tuple[LoopState, Success | None]:
        """The loop's state after `step`, and the attempt that served, if it did.

        The gates refuse (a skip, the shared key next, the `plan_fallbacks`: no attempt made),
        or the attempt is sent and its outcome fed to the loop. A committed stream is
        recorded when it ends (`Recorder.finisher`); any other outcome is recorded here.

        Raises:
            asyncio.CancelledError: the client went away (the attempt is recorded as cancelled).
            turnout.errors.GatewayUnavailable: the breaker store is down under policy `fail`.
        """
        target = step.entry.target
        call = self._resolve(attempt, target, state.plan.key_mode, state.policy, step.is_byok_fallback)
        gates = await self._gates(state, attempt, target, call)
        decided = admission(state, gates)
        gate: Gate | None = None
        if decided.ask_breaker:
            gate = await self._breakers.gate.admit(target.key, attempt.view)
            refused = None if gate.admitted else gate.reason or SkipReason.CIRCUIT_OPEN
            answer = BreakerAnswer(refused=refused, reopen_in_s=gate.reopen_in_s)
            decided = admission(state, msgspec.structs.replace(gates, breaker=answer))
        if not decided.go or call is None or gate is None:  # (an admitted attempt has both)
            return on_refused(state, step, decided, now_s=self._clock()), None
        return await self._send(state, step, attempt, call, gate.probe_token)

    async def _gates(self, state: LoopState, attempt: Attempt, target: Target, call: ResolvedCall | None) -> Gates:
        """The facts of the gates before the breaker's (`turnout.core.admission`). A gate after
        a closed one is not read: reading the tenant key's health may reach the store."""
        if call is None:
            return Gates(resolved=False)
        unsupported = _unsupported(attempt, target, call)
        if unsupported is not None:
            return Gates(unsupported=unsupported)
        info, view = attempt.info, attempt.view
        credential_open = not await self._credential_admits(call, target, info, view)
        capped_s = (
            view.capped_for(plan_cap_scope(call.credential, info.org), target.key) if state.plan.plan_cap else None
        )
        return Gates(credential_open=credential_open, may_fall_back=call.may_fall_back, capped_s=capped_s)

    async def _send(
        self, state: LoopState, step: Dispatch, attempt: Attempt, call: ResolvedCall, probe_token: str | None
    ) -> tuple[LoopState, Success | None]:
        """Send an admitted attempt and feed its outcome to the loop (see `perform`)."""
        target, info, view = step.entry.target, attempt.info, attempt.view
        api = attempt.catalog.apis.get(target.key, "chat")
        spec = call_spec(
            target, call.provider, attempt.request, info, state.policy, step.timeout_s, attempt.native, api
        )
        handle = self._recorder.observer.attempt_started(info, step)
        started = self._clock()
        try:
            if not view.degraded:  # Redis answered this request's health read: send the started record first
                await self._recorder.observer.attempt_dispatched(handle)
            self._paused()
            result = await attempt.upstream(self._client_for(call), spec)
        except asyncio.CancelledError:
            cancelled = Outcome(message="client went away")
            now_s = self._clock()
            state = on_outcome(state, step, cancelled, started_s=started, now_s=now_s, rng=self._rng, kind=_CANCELLED)
            await asyncio.shield(self._recorder.cancelled(handle, info, state.records[-1], probe_token, view))
            raise
        result = self._scrubbed(result, call)
        state = on_outcome(
            state,
            step,
            result.outcome,
            started_s=started,
            now_s=self._clock(),
            rng=self._rng,
            credential_fallback=call.may_fall_back,
        )
        record = state.records[-1]
        success = Success(result=result, probe_token=probe_token, handle=handle, call=call)
        if result.stream is not None and record.kind is FailureKind.SUCCESS:
            return state, success  # a committed stream: recorded when it ends
        ended = partial(self._recorder.ended, handle, info, record, result, probe_token, view, call)
        plain_success = record.kind is FailureKind.SUCCESS and probe_token is None
        if not (plain_success and later(ended)):
            await ended()  # a failure, a probe: recorded before the next attempt
        return state, success

    async def _credential_admits(self, call: ResolvedCall, target: Target, info: RequestInfo, view: HealthView) -> bool:
        """False while the tenant-owned credential of `call` is failing (SPEC §5 "What counts")."""
        if call.credential is Credential.SHARED or not info.org:
            return True
        return await self._breakers.credentials.admits(credential_subject(info.org, target.provider), view)

    def _resolve(
        self, attempt: Attempt, target: Target, key_mode: KeyMode, policy: Policy, byok_fallback: bool
    ) -> ResolvedCall | None:
        """The provider and credential for one attempt (None: skip as NO_CREDENTIAL; SPEC §6)."""
        tenant = self._credentials.credentials(attempt.info.org) if self._credentials is not None else None
        catalog = attempt.catalog
        call = resolve_call(catalog, tenant, target, key_mode=key_mode, policy=policy, byok_fallback=byok_fallback)
        if call is not None and call.custom and self._custom_http is None:
            return None  # a custom endpoint is only ever called through the SSRF-guarded client
        return call

    def _scrubbed(self, result: AttemptResult, call: ResolvedCall) -> AttemptResult:
        """`result` with its upstream texts scrubbed, the key just sent included (`turnout.scrub`)."""
        outcome = self._scrubber.outcome(result.outcome, extra=call.provider.secrets())
        return result if outcome is result.outcome else msgspec.structs.replace(result, outcome=outcome)

    def _client_for(self, call: ResolvedCall) -> httpx.AsyncClient:
        return self._custom_http if call.custom and self._custom_http is not None else self._http


_CANCELLED = FailureKind.CANCELLED


def _unsupported(attempt: Attempt, target: Target, call: ResolvedCall) -> Unsupported | None:
    """What the target's API cannot express of the request (gate 2), or None."""
    info = attempt.info
    api = attempt.catalog.apis.get(target.key, "chat")
    family = family_for(call.provider.kind, info.operation, api)
    refused = (
        family.refusal(attempt.request, target.model, attempt.native)
        if family is not None
        else Refusal(f"`{call.provider.kind}` providers have no {info.operation} API", "model")
        if api == "chat"
        else Refusal(f"`{target.key}` is an `api: responses` offer, which serves no {info.operation}", "model")
    )
    return None if refused is None else Unsupported(refused.message, refused.param)


def call_spec(
    target: Target,
    provider: ProviderConfig,
    request: dict[str, Any],
    info: RequestInfo,
    policy: Policy,
    timeout_s: float,
    native: Native | None = None,
    api: OfferApi = "chat",
) -> CallSpec:
    """The call for one attempt: the client's own body for a target whose family speaks its
    surface (`native_body`: model replaced, `provider` removed), else the OpenAI request; a chat
    carry (`CHAT`: the OpenAI request is the client's own) gives only its passed headers, to a
    family that speaks chat (`CallSpec.passed`).
    `api`: the offer's upstream API (an `api: responses` offer's family speaks `responses`)."""
    retry = policy.retry
    family = family_for(provider.kind, "chat", api)
    same_family = native is not None and family is not None and family.native_surface == native.surface
    passed: tuple[tuple[str, str], ...] = ()
    if native is not None and native.surface == CHAT:  # the OpenAI request is the client's: only its headers ride
        passed, native = (native.headers if same_family else ()), None
    elif not same_family:
        native = None  # another family: the translated request
    return provider_call(
        provider,
        target,
        body=upstream_body(request, target) if native is None else native_body(native.body, target.model),
        timeout_s=timeout_s,
        request_id=info.request_id,
        ttft_timeout_s=retry.ttft_timeout_s,
        stall_timeout_s=retry.stall_timeout_s,
        operation=info.operation,
        native=native,
        api=api,
        passed=passed,
    )
