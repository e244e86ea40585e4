"""The listing memo: the targets a plan may hold, whatever the health, per catalog snapshot.

Owns: `Listings`, the router's memo of what `build_plan(capped=False)`
lists for a request (SPEC §3 step 1): the target keys whose health the
plan's read must cover, and whether the plan has plan-cap fallbacks (whose
usage caps that read also covers).

Why: each plan is built twice, once with no health to learn which targets'
health to read, then with that health. The first build depends only on the
catalog snapshot, the requested model, the routing settings, the fallback
policy's `enabled`, `models`, `comparable` and `only`, the pinned policy's
`allow_other_providers`, the request's preferences and which
credentials its org has (`KeyFacts`: provider names only), never on
health or time; so one build serves every request that shares them, in the
ingress and in the worker (bench/README.md "The plan's listing, built once").
A catalog swap starts a new memo: the old snapshot's listings are dropped
with it.
Must not import: services, FastAPI, arq, Redis.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import msgspec

from turnout.catalog import Catalog
from turnout.core.plan import KeyFacts, Plan, RoutingSettings
from turnout.core.policy import Policy
from turnout.core.preferences import Preferences

MEMO_MAX: Final = 1024
"""Listings kept per catalog snapshot; a full memo is cleared (a key's settings
are per tenant, so a gateway with more distinct ones than this rebuilds more)."""

_encode_settings = msgspec.msgpack.Encoder().encode


class Listing(msgspec.Struct, frozen=True, kw_only=True):
    """What a plan may hold, whatever the health.

    Attributes:
        targets: target keys of every entry the plan may have (main sequence
            and special lists, in that order; a key may repeat).
        plan_cap: the plan has plan-cap fallbacks (SPEC §10).
    """

    targets: tuple[str, ...]
    plan_cap: bool


class Listings:
    """Memo of listings for the catalog snapshot in use (module doc).

    Args:
        build: (catalog, model, settings, policy, preferences, keys) -> the
            uncapped plan with no health (`build_plan(capped=False)`); it
            may raise `UnknownModel` or `NoMatchingOffer`, which pass
            through and are not kept.
    """

    def __init__(
        self, build: Callable[[Catalog, str, RoutingSettings, Policy, Preferences, KeyFacts | None], Plan]
    ) -> None:
        self._build = build
        self._catalog: Catalog | None = None
        self._memo: dict[tuple[object, ...], Listing] = {}

    def of(
        self,
        catalog: Catalog,
        model: str,
        settings: RoutingSettings,
        policy: Policy,
        preferences: Preferences,
        keys: KeyFacts | None = None,
    ) -> Listing:
        """The listing of a request for `model` on `catalog` (built on the first request that needs it).

        Raises:
            turnout.core.plan.UnknownModel, turnout.core.plan.NoMatchingOffer: as `build_plan`.
        """
        if catalog is not self._catalog:
            self._catalog, self._memo = catalog, {}
        fallback = policy.fallback
        shape = (
            fallback.enabled,
            fallback.models,
            fallback.comparable,
            fallback.only,
            policy.pinned.allow_other_providers,
        )
        key = (model, _encode_settings(settings), *shape, preferences, keys)
        found = self._memo.get(key)
        if found is None:
            plan = self._build(catalog, model, settings, policy, preferences, keys)
            found = Listing(
                targets=tuple(
                    e.target.key for e in (*plan.entries, *plan.context_window, *plan.content_policy, *plan.plan_cap)
                ),
                plan_cap=bool(plan.plan_cap),
            )
            if len(self._memo) >= MEMO_MAX:
                self._memo.clear()
            self._memo[key] = found
        return found
