"""The shell: the one async attempt loop that performs the core's decisions.

Owns: composing the pure core (plan, loop, verdict) with the edges (the
upstream adapter, an injected clock and sleep, the RNG), and producing one
`RouteResult` per request. It is the only loop; every decision it performs
comes from `turnout.core`. A request's loop (`route`) and a broken stream's
continuation (`continue_stream`) run the same loop shell over the same
attempt path. Its modules, one job each: `attempt` (performing one dispatch:
its gates' `Admission`, the upstream call, the outcome fed back), `recording`
(ending an attempt with the observer and the breakers), `request` (what a
request brings and gets back, the observer hooks), `after_answer` (a worker's
scope in which a plain success's bookkeeping waits until the answer is
delivered). `turnout.observability` implements the observer hooks and
imports this package, never the other way round.
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from typing import Any

import httpx

from turnout.adapters.base import Upstream
from turnout.adapters.exchange import call_json
from turnout.catalog import Catalog, CatalogSource
from turnout.core.breaker import BreakerSettings
from turnout.core.credentials import Credential, is_custom_provider
from turnout.core.loop import GiveUp, LoopState, StopReason, Wait, begin, begin_continuation, next_step
from turnout.core.model_types import confined
from turnout.core.native import Native
from turnout.core.ordering import TargetHealth
from turnout.core.plan import KeyFacts, NoMatchingOffer, Plan, RoutingSettings, build_plan
from turnout.core.policy import Policy
from turnout.core.preferences import Preferences
from turnout.core.types import Target
from turnout.core.verdict import conclude, served_facts
from turnout.health import Breakers, HealthView, credential_subject, plan_cap_scope
from turnout.listing import Listings
from turnout.router.attempt import Attempt, Attempts, Success
from turnout.router.recording import Recorder, output_rate
from turnout.router.request import (
    Clock,
    Finish,
    NullObserver,
    RequestInfo,
    RouteObserver,
    RouteResult,
    Shipped,
    Sleep,
)
from turnout.scrub import Scrubber
from turnout.state.breaker_store import MemoryBreakerStore, cap_subject
from turnout.tenancy.byok import CredentialSource

__all__ = [
    "Clock",
    "Finish",
    "NullObserver",
    "RequestInfo",
    "RouteObserver",
    "RouteResult",
    "Router",
    "Shipped",
    "Sleep",
    "output_rate",
]


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
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._credentials = credentials
        self.scrubber = scrubber or Scrubber(s for p in catalog.current.providers.values() for s in p.secrets())
        self._listings = Listings(self._listing_plan)
        self._recorder = Recorder(
            breakers=self._breakers, observer=observer or NullObserver(), clock=clock, scrubber=self.scrubber
        )
        self._attempts = Attempts(
            http=http,
            custom_http=custom_http,
            breakers=self._breakers,
            recorder=self._recorder,
            clock=clock,
            rng=self._rng,
            credentials=credentials,
            scrubber=self.scrubber,
            paused=self._paused,
        )

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
            classes=catalog.classes,
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
        attempt = Attempt(catalog or self.catalog, request, info, view, upstream, native)
        state = begin(plan, policy, deadline_s=self._clock() + time_left_s)
        state, reason, success = await self._run(state, attempt)
        if reason is StopReason.SERVED and success is not None:
            return self._served(state, success, info, view)
        verdict = conclude(state, reason, draw=self._rng.random())
        return RouteResult(body=None, verdict=verdict, served=verdict.served, records=state.records)

    async def continue_stream(
        self,
        request: dict[str, Any],
        *,
        plan: Plan,
        targets: list[Target],
        first_number: int,
        info: RequestInfo,
        view: HealthView,
        policy: Policy,
        upstream: Upstream,
    ) -> tuple[RouteResult | None, int]:
        """Continue a broken stream on `targets` (SPEC §8, `stream_recovery: continue`): the
        loop of `turnout.core.loop.begin_continuation`, each attempt admitted, sent and recorded
        like any other (`turnout.router.attempt`). An `api: responses` offer is left out: it
        continues no chat message.

        Args:
            request: the continuation request (OpenAI chat, `stream: true`, ending with the
                assistant prefill).
            plan: the request's plan (its key mode).
            targets: the candidates, in order (the broken target first).
            first_number: the number the first continuation attempt gets.
            info, view, policy, upstream: as in `route`.

        Returns:
            (the committed result, with its `finish`, or None when no target gave one; the
            number of attempts made).
        """
        catalog = self.catalog
        chat = [t for t in targets if catalog.apis.get(t.key, "chat") == "chat"]
        state = begin_continuation(plan, chat, policy, first_number=first_number)
        state, _, success = await self._run(state, Attempt(catalog, request, info, view, upstream))
        if success is None:
            return None, len(state.records)
        return self._served(state, success, info, view), len(state.records)

    async def _run(self, state: LoopState, attempt: Attempt) -> tuple[LoopState, StopReason, Success | None]:
        """Perform the core's steps until it gives up: the loop's state, why it stopped, and the
        attempt that served, if one did."""
        success: Success | None = None
        while True:
            step = next_step(state, self._clock())
            if isinstance(step, GiveUp):
                return state, step.reason, success
            if isinstance(step, Wait):
                self._recorder.observer.waited(attempt.info, step.delay_s, step.reason)
                self._paused()
                await self._sleep(step.delay_s)
                continue
            state, served = await self._attempts.perform(state, step, attempt)
            if served is not None and state.stop is StopReason.SERVED:
                success = served

    def _served(self, state: LoopState, success: Success, info: RequestInfo, view: HealthView) -> RouteResult:
        """The answer of a served loop: its body, or its committed stream with the `finish` that records its end."""
        result, served = success.result, served_facts(state)
        if result.stream is None:
            return RouteResult(body=result.body, verdict=None, served=served, records=state.records, shape=result.shape)
        finish = self._recorder.finisher(
            state.records[-1], success.probe_token, success.handle, info, view, success.call
        )
        return RouteResult(
            body=None,
            verdict=None,
            served=served,
            records=state.records,
            stream=result.stream,
            finish=finish,
            shape=result.shape,
        )


def _nothing() -> None:
    """The default `paused` hook."""


def _credential_subjects(org: str, own_providers: frozenset[str] | None, targets: list[str]) -> list[str]:
    """Credential health subjects of `org`'s own keys (`own_providers`; None: it registered no
    credentials) among `targets`' providers, custom endpoints included."""
    if own_providers is None:
        return []
    providers = {t.split("/", 1)[0] for t in targets}
    return [credential_subject(org, p) for p in sorted(providers) if p in own_providers or is_custom_provider(p)]
