"""What tenancy does with an org document (SPEC §6); the document itself is `turnout.stored.orgs`.

Owns: the org document's validation against the configuration (the same
checks as the file's, paths relative to the org:
`squads.research.settings.fallbacks`), policy clamping on save, gateway key
generation and hashing, and the routing identity of a key (scopes resolved
org > squad > key).
Must not import: services, FastAPI, arq, httpx, Redis.
"""

from __future__ import annotations

import hashlib
import re
import secrets

import msgspec
from msgspec import UNSET

from turnout.config import (
    SERVICE_ACCOUNT_ONLY,
    TOKEN_KINDS,
    Config,
    CustomEndpointConfig,
    OrgConfig,
    check_scope_settings,
)
from turnout.core.budget import budget_scope
from turnout.core.credentials import DEFAULT_KEY_MODE
from turnout.core.plan import RoutingSettings
from turnout.core.policy import Clamp, PolicyOverrides, clamp_policy, merge_policy, with_override
from turnout.core.scopes import ScopeSettings, as_model_map, resolve_settings, scope_limits
from turnout.core.types import Target
from turnout.errors import ConfigError
from turnout.rules.ssrf import AllowList, UnsafeURL, check_base_url
from turnout.rules.text import check_id, check_url
from turnout.stored.orgs import KeyDoc, OrgDoc
from turnout.tenancy.identity import Identity

KEY_PREFIX = "tk-"
"""Every generated gateway key starts with this."""
LOOKUP_CHARS = 11
"""Leading characters of a key kept in clear for lookup and display (`tk-` + 8)."""
KEY_RANDOM_BYTES = 24
"""Random bytes in a generated key: 192 bits (SPEC: at least 128)."""

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""Ids of orgs, squads, keys and custom endpoints created through the admin API."""


def hash_token(token: str) -> str:
    """SHA-256 of a gateway key, hex (what is stored)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_gateway_key() -> str:
    """A new gateway key: `tk-` and 192 random bits (URL-safe base64, 32 chars)."""
    return KEY_PREFIX + secrets.token_urlsafe(KEY_RANDOM_BYTES)


def lookup_prefix(token: str) -> str:
    """The clear prefix a key is found by (its first `LOOKUP_CHARS` characters)."""
    return token[:LOOKUP_CHARS]


def clamp_settings(settings: ScopeSettings, config: Config, path: str) -> tuple[ScopeSettings, list[Clamp]]:
    """Clamp a scope's partial policy to the operator's ceilings (SPEC §4: on save, reported).

    Args:
        settings: the settings as sent.
        config: gateway policy and ceilings.
        path: the settings' path, prefixed to each clamp's `path`.

    Returns:
        The settings with clamped values written into the partial policy,
        and the clamps (`path` e.g. `settings.policy.budget.max_attempts`).

    Names and types were checked when the settings were decoded
    (`PolicyOverrides`); this never raises.
    """
    if not isinstance(settings.policy, PolicyOverrides):
        return settings, []
    _, clamps = clamp_policy(merge_policy(config.policy, settings.policy), config.raw.ceilings)
    partial = settings.policy
    for clamp in clamps:
        partial = with_override(partial, clamp.path, clamp.applied)
    out = [Clamp(path=f"{path}.policy.{c.path}", requested=c.requested, applied=c.applied) for c in clamps]
    return msgspec.structs.replace(settings, policy=partial), out


def _org_config(doc: OrgDoc) -> OrgConfig:
    endpoints = {k: CustomEndpointConfig(base_url=v.base_url) for k, v in doc.custom_endpoints.items()}
    return OrgConfig(custom_endpoints=endpoints)


def _check_settings(path: str, settings: ScopeSettings, config: Config, org: OrgConfig) -> None:
    clamped, _ = clamp_settings(settings, config, path)  # a stored policy is in force clamped; never refused
    check_scope_settings(path, clamped, config, org)


def validate_org(doc: OrgDoc, config: Config, allow: AllowList, previous: OrgDoc | None = None) -> None:
    """Check a whole org document, as the configuration file is checked (SPEC §6, §11).

    Args:
        previous: the stored document this one replaces, if any. A provider
            key it already held stays allowed after the operator removed
            that provider from the catalog: the key is inert (no offer can
            use it), and refusing it would refuse every later write to the
            org, revoking its gateway keys included, until it is deleted.

    Raises:
        ConfigError: the first problem, its path relative to the org
            (`custom_endpoints.vllm.base_url: 10.0.0.5 is a private address`);
            for a scope's settings, each of their problems (`check_scope_settings`).
    """
    org = _org_config(doc)
    check_id("id", doc.id)
    for name, endpoint in doc.custom_endpoints.items():
        if ":" in name or not name:
            raise ConfigError(f"custom_endpoints.{name}: an endpoint id cannot contain ':'")
        check_id(f"custom_endpoints.{name}", name)
        check_url(f"custom_endpoints.{name}.base_url", endpoint.base_url)
        try:
            check_base_url(endpoint.base_url, allow)
        except UnsafeURL as exc:
            raise ConfigError(f"custom_endpoints.{name}.base_url: refused: {exc}") from None
    kept = previous.provider_keys if previous is not None else {}
    for provider in doc.provider_keys:
        if provider not in config.raw.providers and provider not in kept:
            raise ConfigError(f"provider_keys.{provider}: unknown provider (not in `providers`)")
        known = config.raw.providers.get(provider)
        if known is not None and known.kind in TOKEN_KINDS and provider not in kept:
            raise ConfigError(f"provider_keys.{provider}: {SERVICE_ACCOUNT_ONLY}")
    _check_settings("settings", doc.settings, config, org)
    for name, squad in doc.squads.items():
        check_id(f"squads.{name}", name)
        _check_settings(f"squads.{name}.settings", squad.settings, config, org)
    for name, key in doc.keys.items():
        if key.name != name:
            raise ConfigError(f"keys.{name}.name: does not match its id")
        check_id(f"keys.{name}", name)
        if key.squad is not None and key.squad not in doc.squads:
            raise ConfigError(f"keys.{name}.squad: unknown squad {key.squad!r}")
        _check_settings(f"keys.{name}.settings", key.settings, config, org)


FALLBACK_MAPS: tuple[str, ...] = ("fallbacks", "context_window_fallbacks", "content_policy_fallbacks", "plan_fallbacks")
"""The settings that map a model to the models tried after it; with `reroutes`, the model lists
whose `custom:<endpoint>:<model>` entries become targets (`identity_of`)."""


def references(doc: OrgDoc, entry_prefix: str) -> list[str]:
    """Paths of settings whose model lists hold an entry starting with `entry_prefix`.

    Used to refuse deleting a custom endpoint that a setting still names.
    """
    found: list[str] = []
    scopes = [("settings", doc.settings)]
    scopes += [(f"squads.{n}.settings", s.settings) for n, s in doc.squads.items()]
    scopes += [(f"keys.{n}.settings", k.settings) for n, k in doc.keys.items()]
    for path, settings in scopes:
        if isinstance(settings.reroutes, list) and any(m.startswith(entry_prefix) for m in settings.reroutes):
            found.append(f"{path}.reroutes")
        for name in FALLBACK_MAPS:
            models = [m for ms in as_model_map(getattr(settings, name)).values() for m in ms]
            if any(m.startswith(entry_prefix) for m in models):
                found.append(f"{path}.{name}")
    return found


def custom_provider(org: str, endpoint: str) -> str:
    """The provider name of an org's custom endpoint (breaker and health are per org)."""
    return f"custom:{org}:{endpoint}"


def identity_of(doc: OrgDoc, key: KeyDoc, config: Config) -> Identity:
    """The routing identity of `key`: each setting from org, else squad, else key (SPEC §6).

    The policy is the gateway policy overlaid with the resolved partial
    policy, clamped to the ceilings in force now; `custom:<id>:<model>`
    entries naming this org's endpoints become targets on them.
    """
    squad = doc.squads[key.squad].settings if key.squad is not None and key.squad in doc.squads else None
    scope = resolve_settings(doc.settings, squad, key.settings)
    policy = config.policy
    if isinstance(scope.policy, PolicyOverrides):
        policy = merge_policy(policy, scope.policy)
    policy, _ = clamp_policy(policy, config.raw.ceilings)
    maps = {name: as_model_map(getattr(scope, name)) for name in FALLBACK_MAPS}
    reroutes = tuple(scope.reroutes) if scope.reroutes is not UNSET else ()
    custom: dict[str, Target] = {}
    for entry in [*reroutes, *(m for mm in maps.values() for ms in mm.values() for m in ms)]:
        if entry.startswith("custom:"):
            _, endpoint, model = entry.split(":", 2)
            if endpoint in doc.custom_endpoints:
                custom[entry] = Target(provider=custom_provider(doc.id, endpoint), model=model, catalog_model=entry)
    settings = RoutingSettings(
        reroutes=reroutes,
        fallbacks=maps["fallbacks"],
        context_window_fallbacks=maps["context_window_fallbacks"],
        content_policy_fallbacks=maps["content_policy_fallbacks"],
        plan_fallbacks=maps["plan_fallbacks"],
        key_mode=scope.key_mode if scope.key_mode is not UNSET else DEFAULT_KEY_MODE,
        custom_targets=custom,
    )
    squad_scope = (key.squad, squad) if key.squad is not None and squad is not None else None
    limits = scope_limits(doc.id, doc.settings, squad_scope, (key.name, key.settings))
    return Identity(
        org=doc.id,
        squad=key.squad,
        key=key.name,
        admin=key.admin,
        settings=settings,
        policy=policy,
        limits=limits,
        budget=budget_scope(doc.settings, squad, key.settings, squad_name=key.squad, key_name=key.name),
    )
