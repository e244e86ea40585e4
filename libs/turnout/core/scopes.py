"""Scopes: which org / squad / key setting is in force (SPEC §6 "Scopes").

Owns: the per-setting resolution rule — the highest scope that sets a
setting wins (org over squad over key); a scope left on *inherit* (UNSET)
falls through.
Must not import: anything outside the standard library, msgspec and
`turnout.core`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from turnout.core.limits import Limits, ScopeLimits
from turnout.core.policy import FallbackOverrides, PolicyOverrides
from turnout.core.spend import Budget, StrategyRule

KeyMode = Literal["own_only", "own_then_shared", "shared_only"]


class ScopeSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Settings one scope may carry; every field UNSET means *inherit*.

    Attributes:
        reroutes: models substituted for the requested one.
        fallbacks: `{model or "*": [models]}`, or a plain list meaning `*`.
        policy: a partial policy (SPEC §4 shape; `turnout.core.policy.PolicyOverrides`).
        key_mode: BYOK credential choice.
        context_window_fallbacks: map used after a context-length failure.
        content_policy_fallbacks: map used after a content-policy failure.
        plan_fallbacks: map used after a quota / usage-cap failure (SPEC §10
            plan-cap continuity).
        budget: what the scope may spend per period; counts the spend of the
            scope that sets it (SPEC §10).
        strategy: rules that change the model served as that spend grows;
            a scope with a strategy ignores its reroute list (SPEC §10).
        limits: this scope's limits (`turnout.core.limits.Limits`). Unlike
            the other settings, the limits of every scope apply at once,
            each with its own counter (`scope_limits`).
    """

    reroutes: list[str] | UnsetType = UNSET
    fallbacks: dict[str, list[str]] | list[str] | UnsetType = UNSET
    policy: PolicyOverrides | UnsetType = UNSET
    key_mode: KeyMode | UnsetType = UNSET
    context_window_fallbacks: dict[str, list[str]] | list[str] | UnsetType = UNSET
    content_policy_fallbacks: dict[str, list[str]] | list[str] | UnsetType = UNSET
    plan_fallbacks: dict[str, list[str]] | list[str] | UnsetType = UNSET
    budget: Budget | UnsetType = UNSET
    strategy: list[StrategyRule] | UnsetType = UNSET
    limits: Limits | UnsetType = UNSET


SETTING_NAMES: tuple[str, ...] = tuple(ScopeSettings.__struct_fields__)

RESOLVED_NAMES: tuple[str, ...] = tuple(n for n in SETTING_NAMES if n != "limits")
"""The settings `resolve_settings` resolves; `limits` applies from every scope (`scope_limits`)."""


def resolve_settings(org: ScopeSettings, squad: ScopeSettings | None, key: ScopeSettings | None) -> ScopeSettings:
    """Resolve each setting independently: org over squad over key (SPEC §6).

    Args:
        org: the org's settings.
        squad: the squad's settings, or None when the key has no squad.
        key: the key's own settings, or None.

    Returns:
        A `ScopeSettings` where each field comes from the highest scope that
        sets it; fields no scope sets stay UNSET (the gateway default
        applies). `limits` stays UNSET: see `scope_limits`.
    """
    resolved: dict[str, Any] = {}
    for name in RESOLVED_NAMES:
        for scope in (org, squad, key):
            if scope is None:
                continue
            value = getattr(scope, name)
            if value is not UNSET:
                resolved[name] = value
                break
    return ScopeSettings(**resolved)


def as_model_map(value: Mapping[str, list[str]] | list[str] | UnsetType) -> dict[str, tuple[str, ...]]:
    """Normalise a fallback setting: a plain list means `{"*": list}` (SPEC §6)."""
    if value is UNSET:
        return {}
    if isinstance(value, list):
        return {"*": tuple(value)}
    return {k: tuple(v) for k, v in value.items()}


MODEL_MAPS: tuple[str, ...] = ("fallbacks", "context_window_fallbacks", "content_policy_fallbacks", "plan_fallbacks")
"""The settings that map a model (or `*`) to a list of models (`as_model_map`)."""


def named_models(settings: ScopeSettings) -> Iterator[tuple[str, str]]:
    """Every model a scope's settings name, as (path within the settings, entry), in order.

    Paths are as the configuration's validation names them
    (`turnout.config.check_scope_settings`): `reroutes[0]`;
    `fallbacks.gpt-5` for a map's key and `fallbacks.gpt-5[0]` for its
    entries (`fallbacks[0]` for a plain list); `policy.fallback.models[0]`, then
    `policy.fallback.only[0]`;
    `strategy[0].model` and `strategy[0].fallback`. Entries are as written:
    a catalog model, `*` (a map's key) or `custom:<endpoint>:<model>`.
    """
    if isinstance(settings.reroutes, list):
        yield from ((f"reroutes[{i}]", model) for i, model in enumerate(settings.reroutes))
    for name in MODEL_MAPS:
        value = getattr(settings, name)
        for key, models in as_model_map(value).items():
            sub = name if isinstance(value, list) else f"{name}.{key}"
            if not isinstance(value, list):
                yield sub, key
            yield from ((f"{sub}[{i}]", model) for i, model in enumerate(models))
    if isinstance(settings.policy, PolicyOverrides):
        fallback = settings.policy.fallback
        if isinstance(fallback, FallbackOverrides):
            for field in ("models", "only"):
                if isinstance(named := getattr(fallback, field), tuple):
                    yield from ((f"policy.fallback.{field}[{i}]", model) for i, model in enumerate(named))
    if isinstance(settings.strategy, list):
        for i, rule in enumerate(settings.strategy):
            yield f"strategy[{i}].model", rule.model
            if rule.fallback is not None:
                yield f"strategy[{i}].fallback", rule.fallback


def scope_limits(
    org_id: str,
    org: ScopeSettings,
    squad: tuple[str, ScopeSettings] | None,
    key: tuple[str, ScopeSettings],
) -> tuple[ScopeLimits, ...]:
    """Every `limits` setting that applies to a key, org first (SPEC §10 "Limits").

    Not resolved like the other settings: an org's limits bind all of its
    keys together (one counter), a squad's its squad's keys, a key's that
    key; all of them apply to each request.

    Args:
        org_id: the org's id.
        org: the org's settings.
        squad: (name, settings) of the key's squad, or None.
        key: (name, settings) of the key.
    """
    found: list[ScopeLimits] = []
    if isinstance(org.limits, Limits):
        found.append(ScopeLimits(kind="org", org=org_id, limits=org.limits))
    if squad is not None and isinstance(squad[1].limits, Limits):
        found.append(ScopeLimits(kind="squad", org=org_id, id=squad[0], limits=squad[1].limits))
    if isinstance(key[1].limits, Limits):
        found.append(ScopeLimits(kind="key", org=org_id, id=key[0], limits=key[1].limits))
    return tuple(found)
