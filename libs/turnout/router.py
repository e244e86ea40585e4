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
from functools import partial
from typing import Any, Protocol

import httpx
import msgspec

from turnout.adapters.base import AttemptResult, CallSpec, Refusal, Upstream, Usage, upstream_body
from turnout.adapters.exchange import call_json
from turnout.adapters.families import family_for
from turnout.catalog import Catalog, CatalogSource
from turnout.config import OfferApi, ProviderConfig
from turnout.core.breaker import BreakerSettings
from turnout.core.classify import DISPOSITION, classify
from turnout.core.credentials import DEFAULT_KEY_MODE, Credential, is_custom_provider
from turnout.core.loop import (
    AttemptRecord,
    Dispatch,
    GiveUp,
    LoopState,
    SkipReason,
    StopReason,
    Wait,
    attempt_record,
    begin,
    next_step,
    on_credential_open,
    on_outcome,
    on_plan_capped,
    on_skip,
)
from turnout.core.model_types import Operation, confined
from turnout.core.native import CHAT, Native, native_body
from turnout.core.ordering import TargetHealth
from turnout.core.plan import KeyFacts, NoMatchingOffer, Plan, PlanEntry, Role, RoutingSettings, build_plan
from turnout.core.policy import Policy
from turnout.core.preferences import Preferences
from turnout.core.scopes import KeyMode
from turnout.core.types import FailureKind, Outcome, Target
from turnout.core.verdict import Served, Verdict, conclude, served_facts
from turnout.health import Breakers, Gate, HealthView, credential_subject, plan_cap_scope
from turnout.listing import Listings
from turnout.observability.after_answer import later
from turnout.scrub import Scrubber
from turnout.state.breaker_store import Loaded, MemoryBreakerStore, Speed, cap_subject
from turnout.tenancy.byok import CredentialSource, ResolvedCall, resolve_call


class Clock(Protocol):
    """Monotonic seconds for in-process deadlines."""

    def __call__(self) -> float: ...


Sleep = Callable[[float], Awaitable[None]]


class Shipped(msgspec.Struct, frozen=True):
    """A health read made elsewhere (the ingress, for a queued job) and the store's clock now.

    Attributes:
        loaded: the read (`HealthView.loaded`), with the store's clock at it.
        store_now_s: the store's clock now (epoch seconds), to age the read by.
    """

    loaded: Loaded
    store_now_s: float


class RequestInfo(msgspec.Struct, frozen=True, kw_only=True):
    """Who asked for what: the facts every attempt record and span carries."""

    request_id: str
    org: str = ""
    squad: str | None = None
    key: str = ""
    requested_model: str = ""
    streaming: bool = False
    strategy: str | None = None
    run: int = 1
    """The job's run, from 1: above 1 a re-run after the worker running it died (arq's job try)."""
    deadline_s: float | None = None
    """The client's deadline, epoch seconds of this host's clock (None: unknown)."""
    operation: Operation = "chat"
    """The upstream call asked for (`turnout.core.model_types.Operation`): the request body is its OpenAI form."""


class RouteObserver(Protocol):
    """Telemetry hooks of the loop (traces, attempt records, metrics).

    `attempt_started` returns a handle passed back to `attempt_dispatched`
    (awaited just before the upstream call, unless the request's health view
    is degraded: a durable "attempt started" record reaches its store,
    bounded) and `attempt_ended`; for a committed stream, `attempt_ended`
    comes when the stream ends.
    """

    def attempt_started(self, info: RequestInfo, dispatch: Dispatch) -> object: ...

    async def attempt_dispatched(self, handle: object) -> None: ...

    def attempt_ended(self, handle: object, info: RequestInfo, record: AttemptRecord, usage: Usage) -> None: ...

    def waited(self, info: RequestInfo, delay_s: float, reason: str) -> None: ...


class NullObserver:
    """An observer that records nothing."""

    def attempt_started(self, info: RequestInfo, dispatch: Dispatch) -> object:
        """See `RouteObserver`."""
        return None

    async def attempt_dispatched(self, handle: object) -> None:
        """See `RouteObserver`."""

    def attempt_ended(self, handle: object, info: RequestInfo, record: AttemptRecord, usage: Usage) -> None:
        """See `RouteObserver`."""

    def waited(self, info: RequestInfo, delay_s: float, reason: str) -> None:
        """See `RouteObserver`."""


Finish = Callable[[FailureKind, Usage, str], Awaitable[None]]
"""Ends a committed stream's attempt: (final kind, usage, error text)."""


class RouteResult(msgspec.Struct, frozen=True, kw_only=True):
    """The answer to one request.

    Attributes:
        body: the upstream body on a non-streaming success, else None.
        stream: the committed upstream stream on a streaming success.
        finish: for a committed stream, call once when it ends (records the
            attempt's final outcome with the breaker and the observer).
        verdict: the error answer when not served, else None.
        served: facts for the `x-turnout-*` headers.
        records: every attempt's decision record (a committed stream's
            attempt as of its commit point).
        shape: the surface `body` is in (`AttemptResult.shape`: `chat`, or
            a native call's surface, the provider's body as is).
    """

    body: bytes | None
    verdict: Verdict | None
    served: Served
    records: tuple[AttemptRecord, ...]
    stream: Any = None
    finish: Finish | None = None
    shape: str = CHAT


class Router:
    """Runs the attempt loop of SPEC §3 for chat completions.

    Args:
        catalog: models, offers and providers: a fixed `Catalog` or the live one
            (`turnout.catalog.live`). `plan` and `route` each read it once
            (or take the caller's snapshot) and keep it for the whole call.
        http: the process's shared upstream client.
        breakers: fleet-wide breakers and health (default: in-memory, for
            one process and tests).
        observer: telemetry hooks (default: none).
        clock: monotonic seconds (injected for tests).
        sleep: waits a number of seconds (injected for tests).
        rng: jitter and tie-break source.
        credentials: tenants' BYOK keys and custom endpoints (default: none;
            every target uses the shared key).
        custom_http: the SSRF-guarded client for tenant custom endpoints
            (`turnout.adapters.guarded`); without it they are never called.
        scrubber: the process's egress scrubber (`turnout.scrub`): every
            upstream text passes it before the loop, records, spans or the
            breaker see it (default: one knowing only the catalog's keys).
        paused: called (no arguments, in the request's task) each time the
            request's work stops to wait on the upstream or on the clock:
            just before an upstream call (after the attempt's started record
            is sent to Redis) and before a wait between attempts. A worker gives its
            job's start pass back there (`turnout_worker.start_gate`).
            Default: nothing.
    """

    def __init__(
        self,
        *,
        catalog: CatalogSource,
        http: httpx.AsyncClient,
        breakers: Breakers | None = None,
        observer: RouteObserver | None = None,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        credentials: CredentialSource | None = None,
        custom_http: httpx.AsyncClient | None = None,
        scrubber: Scrubber | None = None,
        paused: Callable[[], None] | None = None,
    ) -> None:
        self._catalogs = catalog
        self._paused = paused or _nothing
        self._http = http
        self._breakers = breakers or Breakers.over(
            MemoryBreakerStore(), BreakerSettings(), sole_targets=catalog.current.sole_targets, rng=rng
        )
        self._observer: RouteObserver = observer or NullObserver()
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._credentials = credentials
        self._custom_http = custom_http
        self.scrubber = scrubber or Scrubber(s for p in catalog.current.providers.values() for s in p.secrets())
        self._listings = Listings(self._listing_plan)

    @property
    def catalog(self) -> Catalog:
        """The catalog in force now: a caller's snapshot for `plan` and `route` of one request."""
        return self._catalogs.current

    def _build(
        self,
        catalog: Catalog,
        model: str,
        settings: RoutingSettings,
        policy: Policy,
        health: dict[str, TargetHealth],
        *,
        capped: bool = True,
        preferences: Preferences = Preferences(),
        keys: KeyFacts | None = None,
    ) -> Plan:
        if catalog.type_of(model) == "embedding":  # its own offers only (turnout.core.model_types)
            settings, policy = confined(settings, policy)
        return build_plan(
            model,
            catalog=catalog.models,
            providers=catalog.provider_names,
            settings=settings,
            policy=policy,
            health=health,
            rng=self._rng,
            orders=catalog.orders,
            order_settings=catalog.order_settings(self._breakers.order_settings),
            capped=capped,
            preferences=preferences,
            keys=keys,
        )

    def _listing_plan(
        self,
        catalog: Catalog,
        model: str,
        settings: RoutingSettings,
        policy: Policy,
        preferences: Preferences,
        keys: KeyFacts | None,
    ) -> Plan:
        return self._build(catalog, model, settings, policy, {}, capped=False, preferences=preferences, keys=keys)

    async def plan(
        self,
        model: str,
        settings: RoutingSettings,
        policy: Policy,
        org: str = "",
        preferences: Preferences = Preferences(),
        catalog: Catalog | None = None,
        shipped: Shipped | None = None,
    ) -> tuple[Plan, HealthView]:
        """The plan for `model`, its offers ordered by shared health and the
        fleet's measures (SPEC §5, §10), narrowed by the request's `preferences`.

        The one read of the health store also covers the credential health of
        `org`'s own keys for the plan's providers and, when the plan has
        `plan_fallbacks`, the usage caps known for its targets.

        A worker passes the read the ingress made for the job (`shipped`):
        it stands for the read when fresh enough and complete
        (`Breakers.reads.shipped_view`), and a plan with usage caps always reads.

        Args:
            catalog: the request's catalog snapshot (default: the one in force now).
            shipped: the ingress's health read for a queued job (see above).

        Returns:
            The plan and the health view it was ordered by (reused for
            admissions).

        Raises:
            turnout.core.plan.UnknownModel: no such model.
            turnout.core.plan.NoMatchingOffer: the preferences leave no offer.
            GatewayUnavailable: the breaker store is down under policy `fail`.
        """
        catalog = catalog or self.catalog
        tenant = self._credentials.credentials(org) if self._credentials is not None and org else None
        own = tenant.own_providers if tenant is not None else None  # None: the org registered no credentials
        keys: KeyFacts | None = KeyFacts(own_providers=own or frozenset(), shared_providers=catalog.keyed_providers)
        try:
            listing = self._listings.of(catalog, model, settings, policy, preferences, keys)
        except NoMatchingOffer:
            if preferences.narrows:
                raise
            keys = None  # no offer has a credential: plan them all, and the attempts say so (NO_CREDENTIAL)
            listing = self._listings.of(catalog, model, settings, policy, preferences, keys)
        targets = list(listing.targets)
        scopes = (plan_cap_scope(Credential.SHARED, org), plan_cap_scope(Credential.OWN, org)) if org else ("shared",)
        caps = [cap_subject(s, t) for t in targets for s in dict.fromkeys(scopes)] if listing.plan_cap else []
        subjects = [*targets, *_credential_subjects(org, own, targets)]
        view = None
        if shipped is not None and not caps:
            view = self._breakers.reads.shipped_view(subjects, shipped.loaded, shipped.store_now_s)
        if view is None:
            view = await self._breakers.reads.view(subjects, caps)
        health = view.ordering_health(self._breakers.settings)
        return self._build(catalog, model, settings, policy, health, preferences=preferences, keys=keys), view

    def listed_targets(
        self,
        model: str,
        settings: RoutingSettings,
        policy: Policy,
        preferences: Preferences = Preferences(),
        catalog: Catalog | None = None,
    ) -> list[str]:
        """Every target key a plan for `model` may hold under `preferences`, whatever the health
        (the listing `plan()` reads health for; no I/O). `catalog` as in `plan()`.

        Raises:
            turnout.core.plan.UnknownModel, turnout.core.plan.NoMatchingOffer: as `plan()`.
        """
        return list(self._listings.of(catalog or self.catalog, model, settings, policy, preferences, None).targets)

    async def route(
        self,
        request: dict[str, Any],
        *,
        plan: Plan,
        view: HealthView,
        policy: Policy,
        time_left_s: float,
        info: RequestInfo,
        upstream: Upstream = call_json,
        catalog: Catalog | None = None,
        native: Native | None = None,
    ) -> RouteResult:
        """Serve one chat completion request through the attempt loop.

        Args:
            request: the client's JSON body (decoded).
            plan: from `plan()`.
            view: the health view from `plan()`.
            policy: the clamped policy in force.
            time_left_s: seconds until the client's deadline.
            info: the request's identity (records, spans, `x-request-id`).
            upstream: the adapter (`call_json`, or the streaming one, which
                commits at the first content).
            catalog: the snapshot `plan` used (default: the one in force
                now); every attempt of the request resolves its provider in it.
            native: the client's own request when it came on another surface
                than chat (`turnout.core.native`): a target whose family speaks
                that surface is sent it as is (SPEC §13 "same family, same
                bytes"), any other the translated `request` (or skipped when
                there is none, `Native.crossing`). None: `request` everywhere.

        Returns:
            A `RouteResult`. Cancellation (client gone) propagates after the
            in-flight upstream call is cancelled.
        """
        catalog = catalog or self.catalog
        now = self._clock()
        state = begin(plan, policy, deadline_s=now + time_left_s)
        success: tuple[AttemptResult, Gate, object, ResolvedCall] | None = None
        while True:
            step = next_step(state, self._clock())
            if isinstance(step, GiveUp):
                break
            if isinstance(step, Wait):
                self._observer.waited(info, step.delay_s, step.reason)
                self._paused()
                await self._sleep(step.delay_s)
                continue
            state, outcome = await self._attempt(catalog, state, step, request, info, view, upstream, native)
            if outcome is not None and state.stop is StopReason.SERVED:
                success = outcome
        return self._result(state, step.reason, success, info, view)

    async def _attempt(
        self,
        catalog: Catalog,
        state: LoopState,
        step: Dispatch,
        request: dict[str, Any],
        info: RequestInfo,
        view: HealthView,
        upstream: Upstream,
        native: Native | None,
    ) -> tuple[LoopState, tuple[AttemptResult, Gate, object, ResolvedCall] | None]:
        target = step.entry.target
        call = self._resolve(catalog, target, info, state.plan.key_mode, state.policy, step.is_byok_fallback)
        if call is None:
            return on_skip(state, step, reason=SkipReason.NO_CREDENTIAL, reopen_in_s=None, now_s=self._clock()), None
        api = catalog.apis.get(target.key, "chat")
        family = family_for(call.provider.kind, info.operation, api)
        refused = (
            family.refusal(request, target.model, native)
            if family is not None
            else Refusal(f"`{call.provider.kind}` providers have no {info.operation} API", "model")
            if api == "chat"
            else Refusal(f"`{target.key}` is an `api: responses` offer, which serves no {info.operation}", "model")
        )
        if refused is not None:  # its API has no form for the request: the next target may have one
            skipped = on_skip(
                state,
                step,
                reason=SkipReason.UNSUPPORTED,
                reopen_in_s=None,
                now_s=self._clock(),
                detail=refused.message,
                param=refused.param,
            )
            return skipped, None
        if not await self._credential_admits(call, target, info, view):
            return on_credential_open(state, step, may_fall_back=call.may_fall_back, now_s=self._clock()), None
        capped_s = (
            view.capped_for(plan_cap_scope(call.credential, info.org), target.key) if state.plan.plan_cap else None
        )
        if capped_s is not None and not state.special:
            return on_plan_capped(state, step, reopen_in_s=capped_s, now_s=self._clock()), None
        gate = await self._breakers.gate.admit(target.key, view)
        if not gate.admitted:
            return on_skip(
                state,
                step,
                reason=gate.reason or SkipReason.CIRCUIT_OPEN,
                reopen_in_s=gate.reopen_in_s,
                now_s=self._clock(),
            ), None
        spec = _spec(target, call.provider, request, info, state.policy, step.timeout_s, native, api)
        handle = self._observer.attempt_started(info, step)
        started = self._clock()
        try:
            if not view.degraded:  # Redis answered this request's health read: send the started record first
                await self._observer.attempt_dispatched(handle)
            self._paused()
            result = await upstream(self._client_for(call), spec)
        except asyncio.CancelledError:
            state = on_outcome(
                state,
                step,
                Outcome(message="client went away"),
                started_s=started,
                now_s=self._clock(),
                rng=self._rng,
                kind=FailureKind.CANCELLED,
            )
            self._observer.attempt_ended(handle, info, state.records[-1], Usage())
            await asyncio.shield(
                self._breakers.results.record(
                    target.key, FailureKind.CANCELLED, probe_token=gate.probe_token, error="", view=view
                )
            )
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
        if result.stream is not None and record.kind is FailureKind.SUCCESS:
            return state, (result, gate, handle, call)  # a committed stream: recorded when it ends
        plain_success = record.kind is FailureKind.SUCCESS and gate.probe_token is None
        if not (plain_success and later(partial(self._ended, handle, info, record, result, gate, view, call))):
            await self._ended(handle, info, record, result, gate, view, call)  # a failure, a probe: before the next
        return state, (result, gate, handle, call)

    async def _credential_admits(self, call: ResolvedCall, target: Target, info: RequestInfo, view: HealthView) -> bool:
        """False while the tenant-owned credential of `call` is failing (SPEC §5 "What counts")."""
        if call.credential is Credential.SHARED or not info.org:
            return True
        return await self._breakers.credentials.admits(credential_subject(info.org, target.provider), view)

    def _record_args(self, call: ResolvedCall, target: Target, info: RequestInfo) -> dict[str, Any]:
        """The credential facts `Breakers.results.record` counts by."""
        owned = call.credential is not Credential.SHARED and bool(info.org)
        return {
            "credential": call.credential,
            "credential_key": credential_subject(info.org, target.provider) if owned else None,
        }

    def _resolve(
        self,
        catalog: Catalog,
        target: Target,
        info: RequestInfo,
        key_mode: KeyMode,
        policy: Policy,
        byok_fallback: bool,
    ) -> ResolvedCall | None:
        """The provider and credential for one attempt (None: skip as NO_CREDENTIAL; SPEC §6)."""
        tenant = self._credentials.credentials(info.org) if self._credentials is not None else None
        call = resolve_call(catalog, tenant, target, key_mode=key_mode, policy=policy, byok_fallback=byok_fallback)
        if call is not None and call.custom and self._custom_http is None:
            return None  # a custom endpoint is only ever called through the SSRF-guarded client
        return call

    def _scrubbed(self, result: AttemptResult, call: ResolvedCall) -> AttemptResult:
        """`result` with its upstream texts scrubbed, the key just sent included (`turnout.scrub`)."""
        outcome = self.scrubber.outcome(result.outcome, extra=call.provider.secrets())
        return result if outcome is result.outcome else msgspec.structs.replace(result, outcome=outcome)

    def _client_for(self, call: ResolvedCall) -> httpx.AsyncClient:
        return self._custom_http if call.custom and self._custom_http is not None else self._http

    async def _ended(
        self,
        handle: object,
        info: RequestInfo,
        record: AttemptRecord,
        result: AttemptResult,
        gate: Gate,
        view: HealthView,
        call: ResolvedCall,
    ) -> None:
        self._observer.attempt_ended(handle, info, record, result.usage)
        measures = None
        if record.kind is FailureKind.SUCCESS:  # a JSON answer: its latency is the whole call
            measures = Speed(ttft_ms=record.duration_ms, tokens_per_s=output_rate(result.usage, record.duration_ms))
        await self._breakers.results.record(
            record.target.key,
            record.kind,
            probe_token=gate.probe_token,
            error=_error_text(record.status, record.message),
            view=view,
            retry_after_s=record.retry_after_s,
            measures=measures,
            **self._record_args(call, record.target, info),
        )
        if record.kind is FailureKind.QUOTA_EXHAUSTED and record.retry_after_s:  # the provider said when it resets
            await self._breakers.plan_caps.cap(
                plan_cap_scope(call.credential, info.org), record.target.key, record.retry_after_s, view
            )

    async def attempt_once(
        self,
        request: dict[str, Any],
        *,
        target: Target,
        number: int,
        info: RequestInfo,
        view: HealthView,
        policy: Policy,
        upstream: Upstream,
        reason: str,
        key_mode: KeyMode = DEFAULT_KEY_MODE,
    ) -> tuple[RouteResult | None, AttemptRecord | None]:
        """One attempt outside the loop (a stream continuation), admitted,
        recorded and counted like any other.

        Returns:
            (a committed result with its `finish`, its record) on a committed
            stream or a success; (None, record) on a failure; (None, None)
            when the target was skipped (an `api: responses` offer, no credential, breaker OPEN).
        """
        if self.catalog.apis.get(target.key, "chat") != "chat":
            return None, None  # an `api: responses` offer continues no chat message
        call = self._resolve(self.catalog, target, info, key_mode, policy, False)
        if call is None or not await self._credential_admits(call, target, info, view):
            return None, None
        gate = await self._breakers.gate.admit(target.key, view)
        if not gate.admitted:
            return None, None
        timeout_s = policy.retry.per_attempt_timeout_s
        dispatch = Dispatch(
            entry=PlanEntry(target=target, role=Role.PROVIDER_FALLBACK),
            number=number,
            timeout_s=timeout_s,
            is_retry=False,
            resend_count=0,
            delay_before_s=0.0,
            delay_reason=reason,
        )
        handle = self._observer.attempt_started(info, dispatch)
        started = self._clock()
        try:
            if not view.degraded:  # Redis answered this request's health read: send the started record first
                await self._observer.attempt_dispatched(handle)
            self._paused()
            spec = _spec(target, call.provider, request, info, policy, timeout_s)
            result = await upstream(self._client_for(call), spec)
        except asyncio.CancelledError:
            cancelled = attempt_record(
                dispatch,
                Outcome(message="client went away"),
                FailureKind.CANCELLED,
                cycle=1,
                started_s=started,
                now_s=self._clock(),
            )
            self._observer.attempt_ended(handle, info, cancelled, Usage())
            await asyncio.shield(
                self._breakers.results.record(
                    target.key, FailureKind.CANCELLED, probe_token=gate.probe_token, error="", view=view
                )
            )
            raise
        result = self._scrubbed(result, call)
        record = attempt_record(
            dispatch, result.outcome, classify(result.outcome), cycle=1, started_s=started, now_s=self._clock()
        )
        if record.kind is FailureKind.SUCCESS:
            served = Served(provider=target.provider, model=target.model, attempts=number, fallback=True, reroute=False)
            finish = self._finisher(record, gate, handle, info, view, call)
            if result.stream is None:
                await finish(FailureKind.SUCCESS, result.usage, "")
            return RouteResult(
                body=result.body,
                verdict=None,
                served=served,
                records=(record,),
                stream=result.stream,
                finish=finish if result.stream is not None else None,
                shape=result.shape,
            ), record
        await self._ended(handle, info, record, result, gate, view, call)
        return None, record

    def _finisher(
        self,
        record: AttemptRecord,
        gate: Gate,
        handle: object,
        info: RequestInfo,
        view: HealthView,
        call: ResolvedCall,
    ) -> Finish:
        async def finish(kind: FailureKind, usage: Usage, error: str) -> None:
            error = self.scrubber.text(error)
            final = msgspec.structs.replace(
                record,
                kind=kind,
                disposition=DISPOSITION[kind],
                duration_ms=max(0.0, (self._clock() - record.started_s) * 1000.0),
                message=error if kind is not FailureKind.SUCCESS else "",
            )
            self._observer.attempt_ended(handle, info, final, usage)
            # the time to first token is the attempt's duration at its commit point (`record`)
            measures = Speed(
                ttft_ms=record.duration_ms,
                tokens_per_s=output_rate(usage, final.duration_ms) if kind is FailureKind.SUCCESS else None,
            )
            await self._breakers.results.record(
                record.target.key,
                kind,
                probe_token=gate.probe_token,
                error=error,
                view=view,
                measures=measures,
                **self._record_args(call, record.target, info),
            )

        return finish

    def _result(
        self,
        state: LoopState,
        reason: StopReason,
        success: tuple[AttemptResult, Gate, object, ResolvedCall] | None,
        info: RequestInfo,
        view: HealthView,
    ) -> RouteResult:
        if reason is StopReason.SERVED and success is not None:
            result, gate, handle, call = success
            served = served_facts(state)
            if result.stream is None:
                return RouteResult(
                    body=result.body, verdict=None, served=served, records=state.records, shape=result.shape
                )
            finish = self._finisher(state.records[-1], gate, handle, info, view, call)
            return RouteResult(
                body=None,
                verdict=None,
                served=served,
                records=state.records,
                stream=result.stream,
                finish=finish,
                shape=result.shape,
            )
        verdict = conclude(state, reason, draw=self._rng.random())
        return RouteResult(body=None, verdict=verdict, served=verdict.served, records=state.records)


def _nothing() -> None:
    """The default `paused` hook."""


def _spec(
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
    return CallSpec(
        target=target,
        base_url=provider.base_url,
        api_key=provider.api_key or "",
        body=upstream_body(request, target) if native is None else native_body(native.body, target.model),
        timeout_s=timeout_s,
        request_id=info.request_id,
        ttft_timeout_s=retry.ttft_timeout_s,
        stall_timeout_s=retry.stall_timeout_s,
        kind=provider.kind,
        operation=info.operation,
        native=native,
        api_version=provider.api_version,
        region=provider.region,
        api=api,
        auth=provider.auth,
        headers=provider.headers,
        passed=passed,
        project=provider.project,
        location=provider.location,
        credentials_file=provider.credentials_file,
    )


def _credential_subjects(org: str, own_providers: frozenset[str] | None, targets: list[str]) -> list[str]:
    """Credential health subjects of `org`'s own keys (`own_providers`; None: it registered no
    credentials) among `targets`' providers, custom endpoints included."""
    if own_providers is None:
        return []
    providers = {t.split("/", 1)[0] for t in targets}
    return [credential_subject(org, p) for p in sorted(providers) if p in own_providers or is_custom_provider(p)]


def output_rate(usage: Usage, duration_ms: float) -> float | None:
    """Completion tokens per second of one attempt (`turnout.core.ordering` `throughput`),
    or None when it produced none or took no measurable time."""
    if usage.output_tokens <= 0 or duration_ms <= 0:
        return None
    return usage.output_tokens / (duration_ms / 1000.0)


def _error_text(status: int | None, message: str) -> str:
    return f"{status if status is not None else 'no status'}: {message}"[:200]
