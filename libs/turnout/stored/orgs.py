"""The org document as stored in Redis: one per org (SPEC §6).

Owns: the stored shape of an org (org settings, squads, gateway keys, BYOK
provider keys, custom endpoints, the operator's ceilings, and where each
object came from) and its JSON encoder and decoder. What is done with it —
validation, clamping, routing identities, gateway key generation — is in
`turnout.tenancy.orgs`; reading and writing it in `turnout.state.tenant_store`.
Must not import: services, FastAPI, arq, httpx, Redis, `turnout` packages but
`core` and the leaf `turnout.vault` (the state edge stores this document).

Secrets never sit here in clear: gateway keys are SHA-256 digests (with a
short prefix for lookup and display), provider and endpoint keys are
`turnout.vault.Sealed` tokens.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from turnout.core.limits import Limits
from turnout.core.scopes import ScopeSettings
from turnout.core.spend import Budget
from turnout.core.upstream_auth import ProviderAuth
from turnout.vault import Sealed

Origin = Literal["config", "api"]


class Meta(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where an object came from, for the merge with the configuration file.

    Attributes:
        origin: `config` (created or last set by the file) or `api` (created
            or edited through the admin API: the file never touches it again).
        applied: fingerprint of the file's value last applied ("" for `api`).
        updated_s: epoch seconds of the last change.
    """

    origin: Origin = "api"
    applied: str = ""
    updated_s: float = 0.0


class SquadDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A squad: its settings."""

    settings: ScopeSettings = ScopeSettings()
    meta: Meta = Meta()


class KeyDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A gateway key, stored hashed.

    Attributes:
        name: the key's id within its org (records and spans show it).
        digest: SHA-256 of the key, hex.
        prefix: the key's first `LOOKUP_CHARS` characters (lookup, display).
        squad: its squad, or None.
        admin: may call the org's admin routes.
        settings: its own scope settings.
        created_s / expires_s / revoked_s: epoch seconds; None = never.
    """

    name: str
    digest: str
    prefix: str
    squad: str | None = None
    admin: bool = False
    settings: ScopeSettings = ScopeSettings()
    created_s: float = 0.0
    expires_s: float | None = None
    revoked_s: float | None = None
    meta: Meta = Meta()

    def usable(self, now_s: float) -> bool:
        """Neither revoked nor expired at `now_s`."""
        return self.revoked_s is None and (self.expires_s is None or now_s < self.expires_s)


class ProviderKeyDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A tenant's own key for one configured provider (BYOK)."""

    secret: Sealed
    meta: Meta = Meta()


class EndpointDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A tenant's OpenAI-compatible custom endpoint; `secret` None = sends no key.

    `auth`: where the key goes (None: `authorization: Bearer`); `headers`: extra header name ->
    its value sealed to the endpoint and the header (`vault.header_binding`). Fields at their
    defaults are not stored, so an endpoint without them reads as before in a process of the
    version before them (which refuses unknown fields) during a rolling upgrade.
    """

    base_url: str
    secret: Sealed | None = None
    meta: Meta = Meta()
    auth: ProviderAuth | None = None
    headers: dict[str, Sealed] | None = None


class Ceiling(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """What the operator set at one scope: a ceiling the org's admins cannot lift (`turnout.tenancy.ceilings`).

    Attributes:
        limits: the operator's `limits` at that scope (each field set is a ceiling), or None.
        budget: the operator's `budget` at that scope, or None.
    """

    limits: Limits | None = None
    budget: Budget | None = None


class OrgDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """Everything Turnout stores about one org (the Redis value of `turnout:tenancy:org:<id>`).

    Attributes:
        id: the org id.
        settings / settings_meta: org scope settings and their origin.
        squads / keys / provider_keys / custom_endpoints: by name.
        tombstones: paths deleted through the admin API (`squads.x`,
            `keys.y`, ...): the configuration file never re-creates them.
        created_s: epoch seconds.
        ceilings: the operator's ceilings by scope path (`org`, `squads.x`,
            `keys.y`): written by the file and by the operator key only.
            Not stored while empty, so a document without them reads as
            before in a process of the version before them.
    """

    id: str
    settings: ScopeSettings = ScopeSettings()
    settings_meta: Meta = Meta()
    squads: dict[str, SquadDoc] = {}
    keys: dict[str, KeyDoc] = {}
    provider_keys: dict[str, ProviderKeyDoc] = {}
    custom_endpoints: dict[str, EndpointDoc] = {}
    tombstones: tuple[str, ...] = ()
    created_s: float = 0.0
    ceilings: dict[str, Ceiling] = {}


doc_encoder = msgspec.json.Encoder()
doc_decoder = msgspec.json.Decoder(OrgDoc)
