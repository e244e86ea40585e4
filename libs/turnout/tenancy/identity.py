"""Tenancy: gateway keys -> who is calling and which settings govern the call.

Owns: hashing gateway keys (only SHA-256 digests are kept in memory),
authenticating a bearer token, and resolving each key's effective routing
settings and policy once at load (SPEC §6 scopes, `turnout.core.scopes`).
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

import hashlib
from typing import Protocol

import msgspec
from msgspec import UNSET

from turnout.config import Config
from turnout.core.budget import BudgetScope, budget_scope
from turnout.core.plan import RoutingSettings
from turnout.core.policy import Policy, clamp_policy, merge_policy
from turnout.core.limits import ScopeLimits
from turnout.core.scopes import as_model_map, resolve_settings, scope_limits


class Identity(msgspec.Struct, frozen=True, kw_only=True):
    """Who a gateway key belongs to and what governs its requests.

    Attributes:
        org / squad / key: scope ids (squad None when the key has none).
        admin: the key may call the org's admin routes.
        settings: resolved reroutes and fallback maps.
        policy: resolved, clamped policy.
        budget: the budget and spend strategy in force, or None (SPEC §10).
        limits: every scope's `limits` that applies, org first (all enforced).
    """

    org: str
    squad: str | None
    key: str
    admin: bool
    settings: RoutingSettings
    policy: Policy
    budget: BudgetScope | None = None
    limits: tuple[ScopeLimits, ...] = ()


class Authenticator(Protocol):
    """What the ingress authenticates bearer tokens with: the static `KeyRing`, or
    `turnout.tenancy.directory.TenantDirectory` (keys in Redis, editable at run time)."""

    def authenticate(self, token: str | None) -> Identity | None:
        """The identity of a bearer token, or None (unknown, revoked, expired or missing)."""
        ...


def hash_key(secret: str) -> bytes:
    """SHA-256 digest of a gateway key (what is stored; the key itself is not)."""
    return hashlib.sha256(secret.encode("utf-8")).digest()


class KeyRing:
    """Gateway keys by digest, each with its resolved identity."""

    def __init__(self, config: Config) -> None:
        self._by_digest: dict[bytes, Identity] = {}
        raw = config.raw
        for org_name, org in raw.orgs.items():
            for key in org.keys:
                squad = org.squads[key.squad].settings if key.squad else None
                scope = resolve_settings(org.settings, squad, key.settings)
                policy = config.policy
                if scope.policy is not UNSET:
                    policy = merge_policy(policy, scope.policy)
                policy, _ = clamp_policy(policy, raw.ceilings)
                settings = RoutingSettings(
                    reroutes=tuple(scope.reroutes) if scope.reroutes is not UNSET else (),
                    fallbacks=as_model_map(scope.fallbacks),
                    context_window_fallbacks=as_model_map(scope.context_window_fallbacks),
                    content_policy_fallbacks=as_model_map(scope.content_policy_fallbacks),
                    plan_fallbacks=as_model_map(scope.plan_fallbacks),
                )
                limits = scope_limits(
                    org_name, org.settings, (key.squad, squad) if key.squad and squad else None,
                    (key.name, key.settings),
                )
                self._by_digest[hash_key(key.key)] = Identity(
                    org=org_name, squad=key.squad, key=key.name, admin=key.admin, settings=settings, policy=policy,
                    budget=budget_scope(org.settings, squad, key.settings, squad_name=key.squad, key_name=key.name),
                    limits=limits,
                )

    def authenticate(self, token: str | None) -> Identity | None:
        """The identity of a bearer token, or None (unknown or missing).

        The lookup is keyed by the token's SHA-256 digest: a caller can learn
        from timing at most something about digests of its own guesses,
        never about a stored key.
        """
        if not token:
            return None
        return self._by_digest.get(hash_key(token))
