"""Plan: the ordered list of targets one request may attempt (SPEC §3 step 1).

Owns: reroute substitution, model fallback maps, cross-provider expansion of
a model into its offers, pinned `provider/model` requests, the special
fallbacks used only for context-length and content-policy failures, and where
comparable alternates go (after every configured fallback; which ones:
`turnout.core.alternates`). Offers
are ranked by the model's ordering strategy (`turnout.core.ordering`).
Must not import: anything outside the standard library, msgspec and
`turnout.core`.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Final

import msgspec

from turnout.core.alternates import comparable_alternates, constrained
from turnout.core.considered import Considered, Why, left_out
from turnout.core.credentials import credential_choices
from turnout.core.ordering import ORDERINGS, OrderSettings, TargetHealth
from turnout.core.policy import Policy
from turnout.core.preferences import Preferences, apply
from turnout.core.scopes import KeyMode
from turnout.core.types import Target

ModelMap = Mapping[str, Sequence[str]]
"""Requested model (or `*`) -> ordered list of models (SPEC §6 fallbacks)."""


class Role(enum.StrEnum):
    """Why a target is in the plan."""

    PRIMARY = "primary"
    PROVIDER_FALLBACK = "provider_fallback"  # same model, another provider
    MODEL_FALLBACK = "model_fallback"  # another model
    COMPARABLE_ALTERNATE = "comparable_alternate"  # another model of the requested one's class
    CONTEXT_WINDOW_FALLBACK = "context_window_fallback"
    CONTENT_POLICY_FALLBACK = "content_policy_fallback"
    PLAN_FALLBACK = "plan_fallback"  # after a quota / usage-cap failure (SPEC §10)


class PlanEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One target of the plan with the facts the attempt records need.

    Attributes:
        target: the offer to attempt.
        role: why it is here.
        is_reroute: its model came from a reroute list.
        is_strategy: a spend strategy's rule put it here (SPEC §10).
    """

    target: Target
    role: Role
    is_reroute: bool = False
    is_strategy: bool = False

    @property
    def is_fallback(self) -> bool:
        """True for every entry but the primary."""
        return self.role is not Role.PRIMARY

    @property
    def is_comparable(self) -> bool:
        """True for a comparable alternate (`fallback.comparable`, `turnout.core.alternates`)."""
        return self.role is Role.COMPARABLE_ALTERNATE


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    """The targets of one request.

    Attributes:
        requested_model: the model the client asked for.
        entries: the main sequence, primary first.
        context_window: entries tried only after a context-length failure.
        content_policy: entries tried only after a content-policy failure.
        plan_cap: entries tried only after a quota / usage-cap failure, or at
            once instead of a target whose cap is known not to have reset.
        rerouted: a reroute list was in force (the requested model is never
            contacted).
        key_mode: the BYOK mode its attempts choose credentials by
            (`turnout.core.credentials`).
        strategy: the name of the spend strategy rule that shaped it, or None.
        left_out: offers of the main sequence's models the builder left out, and why
            (`turnout.core.considered`: capped, preferences, no credential).
    """

    requested_model: str
    entries: tuple[PlanEntry, ...]
    context_window: tuple[PlanEntry, ...] = ()
    content_policy: tuple[PlanEntry, ...] = ()
    plan_cap: tuple[PlanEntry, ...] = ()
    rerouted: bool = False
    key_mode: KeyMode = "own_then_shared"
    strategy: str | None = None
    left_out: tuple[Considered, ...] = ()


class RoutingSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The resolved per-request settings that shape a plan (SPEC §6).

    Attributes:
        reroutes: models substituted for the requested one, in order.
        fallbacks: model fallback map; key `*` applies to every model.
        context_window_fallbacks: map used only after a context-length failure.
        content_policy_fallbacks: map used only after a content-policy failure.
        plan_fallbacks: map used only after a quota / usage-cap failure.
        key_mode: BYOK credential choice (SPEC §6).
        custom_targets: `custom:<id>:<model>` entry -> the target on the
            org's custom endpoint (SPEC §6); such entries plan like catalog
            models with that one offer.
        strategy_rule: the spend strategy rule whose model is in `reroutes`
            and fallback in `fallbacks` (`turnout.core.budget.with_strategy`),
            or None.
    """

    reroutes: tuple[str, ...] = ()
    fallbacks: Mapping[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    context_window_fallbacks: Mapping[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    content_policy_fallbacks: Mapping[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    plan_fallbacks: Mapping[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    key_mode: KeyMode = "own_then_shared"
    custom_targets: Mapping[str, Target] = msgspec.field(default_factory=dict)
    strategy_rule: str | None = None


class KeyFacts(msgspec.Struct, frozen=True, kw_only=True):
    """Which credentials exist for the request's org (names only, never a secret; SPEC §6 "BYOK").

    Attributes:
        own_providers: providers the org registered a key for.
        shared_providers: providers whose platform key is configured.
    """

    own_providers: frozenset[str] = frozenset()
    shared_providers: frozenset[str] = frozenset()

    def usable(self, target: Target, model_providers: frozenset[str], key_mode: KeyMode) -> bool:
        """Whether an attempt on `target` may carry some credential under `key_mode`
        (`turnout.core.credentials.credential_choices`; `model_providers`: the providers of
        every offer of its catalog model)."""
        return bool(
            credential_choices(
                key_mode=key_mode,
                provider=target.provider,
                own_providers=self.own_providers,
                model_providers=model_providers,
                shared_available=target.provider in self.shared_providers,
                credential_fallback=False,
            )
        )


MAX_MODEL_ID_CHARS: Final = 256
"""The longest `model` a request may name (characters); a longer one is a 400
naming `model`, so no error ever echoes an unbounded client string."""


class UnknownModel(ValueError):
    """The requested model is neither a catalog id nor a pinned `provider/model`.

    Attributes:
        model: the id the client sent.
    """

    def __init__(self, model: str) -> None:
        super().__init__(f"The model `{model}` does not exist or you do not have access to it.")
        self.model = model


class NoMatchingOffer(ValueError):
    """The request's `provider` preferences leave no offer to attempt (SPEC §10).

    Attributes:
        model: the id the client sent.
    """

    def __init__(self, model: str) -> None:
        super().__init__(f"No offer of `{model}` that this key may use satisfies the request's `provider` preferences.")
        self.model = model


def lookup(model_map: ModelMap, model: str) -> tuple[str, ...]:
    """Models mapped from `model`, else from `*`, else none (SPEC §6)."""
    found = model_map.get(model)
    if found is None:
        found = model_map.get("*", ())
    return tuple(found)


def split_pinned(
    model: str, catalog: Mapping[str, Sequence[Target]], providers: frozenset[str]
) -> tuple[str, str | None]:
    """Split a pinned `provider/model` request (SPEC §3 step 1).

    Returns:
        `(catalog_model, provider)`; provider is None when the request is not
        pinned: an exact catalog id wins over a provider prefix.
    """
    if model in catalog or "/" not in model:
        return model, None
    provider, _, rest = model.partition("/")
    if provider in providers and rest:
        return rest, provider
    return model, None


def _dedupe(models: Sequence[str], exclude: frozenset[str]) -> list[str]:
    seen: set[str] = set(exclude)
    out: list[str] = []
    for m in models:
        if m not in seen:
            seen.add(m)
            out.append(m)
    return out


def cap_offers(entries: Sequence[PlanEntry], max_offers: int | None) -> tuple[PlanEntry, ...]:
    """The entries whose target is among the first `max_offers` distinct
    targets (by key), in order; all of them when `max_offers` is None."""
    if max_offers is None or len(entries) <= max_offers:
        return tuple(entries)
    kept: list[str] = []
    for e in entries:
        if e.target.key not in kept and len(kept) < max_offers:
            kept.append(e.target.key)
    return tuple(e for e in entries if e.target.key in kept)


def build_plan(
    requested_model: str,
    *,
    catalog: Mapping[str, Sequence[Target]],
    providers: frozenset[str],
    settings: RoutingSettings,
    policy: Policy,
    health: Mapping[str, TargetHealth],
    rng: random.Random,
    orders: Mapping[str, str] | None = None,
    order_settings: OrderSettings = OrderSettings(),
    capped: bool = True,
    preferences: Preferences = Preferences(),
    keys: KeyFacts | None = None,
    classes: Mapping[str, str] | None = None,
) -> Plan:
    """Build the plan of one request (SPEC §3 step 1, §6).

    Args:
        requested_model: the model id the client sent (maybe `provider/model`).
        catalog: model id -> its offers in configured order.
        providers: the configured provider names (for pinned requests).
        settings: reroutes and fallback maps resolved for this request.
        policy: the policy in force (fallback switches, gateway fallbacks).
        health: target key -> what ordering knows of it (absent: healthy).
        rng: tie-breaking and exploration for offer ranking.
        orders: model id -> ordering strategy name (`ORDERINGS`); absent ones (custom too): `health`.
        order_settings: knobs and prices of the orderings.
        capped: apply `policy.plan.max_offers` and keep one offer per model where the policy (no
            `cross_provider_same_model`) or the preferences (no `allow_fallbacks`, no `order`)
            say so; False only to list every target the plan could hold, to read their health.
        preferences: the request's `provider` object (`turnout.core.preferences`): `sort`
            replaces every model's ordering, the others narrow each model's offers; without
            `allow_fallbacks` the plan keeps only its first model and no special lists.
        keys: the org's credentials, when known: an offer no attempt could carry a credential
            to under `settings.key_mode` is left out before preferences and the cap (SPEC §6:
            under `own_only`, only the offers of providers the org has a key for are eligible).
            None: every offer stays (the attempt skips it as NO_CREDENTIAL).
        classes: catalog model id -> its class (`turnout.core.alternates`); None: no classes.

    Returns:
        The plan. With a reroute list, its models replace the requested one, which is never
        contacted; fallback models come from the maps keyed by the requested model (else `*`),
        then `policy.fallback.models`, kept to `fallback.only`; with `fallback.comparable`, then its
        comparable alternates (none when pinned or under a firing strategy; `_main_sequence`). A
        pinned request keeps only the pinned provider's offers of its model, and no provider fallback for it; unless
        `policy.pinned.allow_other_providers`, its reroutes, fallback models and special lists keep
        only that provider's offers too (a model it does not serve drops out). The main sequence then keeps its first `policy.plan.max_offers` distinct targets,
        after ordering and across provider and model fallbacks; each special list (context length,
        content policy, plan cap) is capped the same way on its own (SPEC §10).

    Raises:
        UnknownModel: the requested (or pinned) model has no offer.
        NoMatchingOffer: the preferences (and `keys`) leave no target in the main sequence.
    """
    if settings.custom_targets:
        catalog = {**catalog, **{entry: (t,) for entry, t in settings.custom_targets.items()}}
    base_model, pinned = split_pinned(requested_model, catalog, providers)
    offers = _Offers(catalog, health, rng, orders, order_settings, settings, policy, preferences, keys, capped, classes)
    if base_model not in catalog or (pinned is not None and not offers.of(base_model, pinned, narrowed=False)):
        raise UnknownModel(requested_model)
    confine = None if policy.pinned.allow_other_providers else pinned  # the whole plan's provider, if any
    entries = _main_sequence(offers, base_model, pinned, confine)
    if not entries:
        raise NoMatchingOffer(requested_model)
    main = cap_offers(entries, offers.limit)
    offers.drop([e.target for e in entries], [e.target for e in main], Why.CAPPED, capped)
    special = partial(offers.special, base_model=base_model, confine=confine)
    return Plan(
        requested_model=requested_model,
        entries=main,
        left_out=tuple(offers.dropped),
        context_window=special(settings.context_window_fallbacks, Role.CONTEXT_WINDOW_FALLBACK),
        content_policy=special(settings.content_policy_fallbacks, Role.CONTENT_POLICY_FALLBACK),
        plan_cap=special(settings.plan_fallbacks, Role.PLAN_FALLBACK),
        rerouted=bool(settings.reroutes),
        key_mode=settings.key_mode,
        strategy=settings.strategy_rule,
    )


class _Offers:
    """The offers of each model as one request may attempt them (`build_plan`'s arguments):
    ranked by the model's ordering, kept to a pinned provider, narrowed to those a credential
    can reach and the preferences allow, one kept without `cross_provider_same_model`; every
    offer the main sequence leaves out is noted in `dropped` (`Plan.left_out`)."""

    def __init__(
        self,
        catalog: Mapping[str, Sequence[Target]],
        health: Mapping[str, TargetHealth],
        rng: random.Random,
        orders: Mapping[str, str] | None,
        order_settings: OrderSettings,
        settings: RoutingSettings,
        policy: Policy,
        preferences: Preferences,
        keys: KeyFacts | None,
        capped: bool,
        classes: Mapping[str, str] | None,
    ) -> None:
        self.catalog, self.health, self.rng, self.orders = catalog, health, rng, orders or {}
        self.order_settings, self.settings, self.policy = order_settings, settings, policy
        self.preferences, self.keys, self.capped = preferences, keys, capped
        self.classes: Mapping[str, str] = classes or {}
        self.reshapes = bool(preferences.order) or preferences.narrows
        self.limit = policy.plan.max_offers if capped else None
        self.dropped: list[Considered] = []

    def drop(self, before: Sequence[Target], after: Sequence[Target], why: Why, note: bool) -> None:
        """Note the targets of `before` not in `after` as left out for `why` (when `note`)."""
        if note:
            self.dropped.extend(left_out(t, why) for t in before if t not in after)

    def of(self, model: str, pin: str | None, *, narrowed: bool = True, note: bool = False) -> tuple[Target, ...]:
        """`model`'s offers, in the order to attempt them (class doc); `note`: record the left-out ones."""
        offers = tuple(self.catalog.get(model, ()))
        if len(offers) > 1:
            ordering = ORDERINGS[self.preferences.sort or self.orders.get(model, "health")]
            ranked = ordering(offers, self.health, self.order_settings, self.rng)
        else:
            ranked = offers  # one offer ranks as itself under every ordering
        if pin is not None:
            ranked = tuple(t for t in ranked if t.provider == pin)
        if narrowed and self.keys is not None:
            providers = frozenset(t.provider for t in offers)
            kept = tuple(t for t in ranked if self.keys.usable(t, providers, self.settings.key_mode))
            self.drop(ranked, kept, Why.NO_CREDENTIAL, note)
            ranked = kept
        if narrowed and self.reshapes:  # else `apply` keeps `ranked` as is (every ordering ranks DOWN targets last)
            kept = apply(ranked, self.preferences, self.order_settings.prices, self.health, listing=not self.capped)
            self.drop(ranked, kept, Why.PREFERENCES, note)
            ranked = kept
        if not self.policy.fallback.cross_provider_same_model and self.capped:  # uncapped lists them all
            self.drop(ranked, ranked[:1], Why.ONE_PER_MODEL, note)
            ranked = ranked[:1]
        return ranked

    def special(
        self, model_map: Mapping[str, tuple[str, ...]], role: Role, base_model: str, confine: str | None
    ) -> tuple[PlanEntry, ...]:
        """A special fallback list (context length, content policy, plan cap): the offers of the
        models `model_map` gives `base_model`, capped on its own; none without `allow_fallbacks`."""
        if not model_map or not self.preferences.allow_fallbacks:
            return ()
        out: list[PlanEntry] = []
        for model in _dedupe(lookup(model_map, base_model), frozenset({base_model})):
            out.extend(PlanEntry(target=t, role=role) for t in self.of(model, confine))
        return cap_offers(out, self.limit)


def _main_sequence(offers: _Offers, base_model: str, pinned: str | None, confine: str | None) -> list[PlanEntry]:
    """The main sequence before the cap: the requested model's offers (or its reroute list's),
    then, with fallback on and allowed, the fallback models' (kept to `fallback.only`) and
    with `fallback.comparable` the comparable alternates' (`build_plan`); else only the first
    model's offers."""
    settings, fb, preferences = offers.settings, offers.policy.fallback, offers.preferences
    rerouted, by_strategy = bool(settings.reroutes), settings.strategy_rule is not None
    heads = [(m, confine) for m in _dedupe(settings.reroutes, frozenset())] if rerouted else [(base_model, pinned)]
    entries: list[PlanEntry] = []
    for model, pin in heads:
        for target in offers.of(model, pin, note=offers.capped):
            first = entries[0].target.catalog_model if entries else None
            role = (
                Role.PRIMARY
                if first is None
                else Role.PROVIDER_FALLBACK
                if target.catalog_model == first
                else Role.MODEL_FALLBACK
            )
            reroute = rerouted and not by_strategy
            entries.append(PlanEntry(target=target, role=role, is_reroute=reroute, is_strategy=by_strategy))
    if not (fb.enabled and preferences.allow_fallbacks):
        return [e for e in entries if e.target.catalog_model == entries[0].target.catalog_model] if entries else []
    used = frozenset(m for m, _ in heads) | ({base_model} if rerouted else frozenset())
    configured = _dedupe(lookup(settings.fallbacks, base_model) + fb.models, used)
    alternates: list[str] = []
    if fb.comparable and pinned is None and not by_strategy:
        order = offers.catalog.keys()
        alternates = comparable_alternates(
            base_model, offers.classes, order, exclude=used | set(configured), only=fb.only
        )
    for models, role in (
        (constrained(configured, fb.only), Role.MODEL_FALLBACK),
        (alternates, Role.COMPARABLE_ALTERNATE),
    ):
        for model in models:
            for target in offers.of(model, confine, note=offers.capped):
                entries.append(PlanEntry(target=target, role=role, is_strategy=by_strategy))
    return entries
