"""Identity: who is calling and which settings govern the call (SPEC §6 scopes).

Owns: the `Identity` a gateway key resolves to (built by
`turnout.tenancy.orgs.identity_of` from the stored org document) and the
`Authenticator` port the ingress authenticates bearer tokens with.
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

from turnout.core.budget import BudgetScope
from turnout.core.limits import ScopeLimits
from turnout.core.plan import RoutingSettings
from turnout.core.policy import Policy


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
    """What the ingress authenticates bearer tokens with:
    `turnout.tenancy.directory.TenantDirectory` (keys in Redis, editable at run time)."""

    def authenticate(self, token: str | None) -> Identity | None:
        """The identity of a bearer token, or None (unknown, revoked, expired or missing)."""
        ...

    @property
    def loaded(self) -> bool:
        """False until the keys were first read: a token found in no snapshot yet may still be valid."""
        ...
