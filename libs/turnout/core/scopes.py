"""Scopes: which org / squad / key setting is in force (SPEC §6 "Scopes").

Owns: the per-setting resolution rule — the highest scope that sets a
setting wins (org over squad over key); a scope left on *inherit* (UNSET)
falls through.
Must not import: anything outside the standard library, msgspec and
`turnout.core`.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

import msgspec
from msgspec import UNSET, UnsetType

from turnout.core.spend import Budget, StrategyRule

KeyMode = Literal["own_only", "own_then_shared", "shared_only"]


class ScopeSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Settings one scope may carry; every field UNSET means *inherit*.

    Attributes:
        reroutes: models substituted for the requested one.
        fallbacks: `{model or "*": [models]}`, or a plain list meaning `*`.
        policy: a partial policy object (SPEC §4 shape).
        key_mode: BYOK credential choice.
        context_window_fallbacks: map used after a context-length failure.
        content_policy_fallbacks: map used after a content-policy failure.
        plan_fallbacks: map used after a quota / usage-cap failure (SPEC §10
            plan-cap continuity).
        budget: what the scope may spend per period; counts the spend of the
            scope that sets it (SPEC §10).
        strategy: rules that change the model served as that spend grows;
            a scope with a strategy ignores its reroute list (SPEC §10).
    """

    reroutes: list[str] | UnsetType = UNSET
    fallbacks: dict[str, list[str]] | list[str] | UnsetType = UNSET
    policy: dict[str, Any] | UnsetType = UNSET
    key_mode: KeyMode | UnsetType = UNSET
    context_window_fallbacks: dict[str, list[str]] | list[str] | UnsetType = UNSET
    content_policy_fallbacks: dict[str, list[str]] | list[str] | UnsetType = UNSET
    plan_fallbacks: dict[str, list[str]] | list[str] | UnsetType = UNSET
    budget: Budget | UnsetType = UNSET
    strategy: list[StrategyRule] | UnsetType = UNSET


SETTING_NAMES: tuple[str, ...] = tuple(ScopeSettings.__struct_fields__)


def resolve_settings(org: ScopeSettings, squad: ScopeSettings | None, key: ScopeSettings | None) -> ScopeSettings:
    """Resolve each setting independently: org over squad over key (SPEC §6).

    Args:
        org: the org's settings.
        squad: the squad's settings, or None when the key has no squad.
        key: the key's own settings, or None.

    Returns:
        A `ScopeSettings` where each field comes from the highest scope that
        sets it; fields no scope sets stay UNSET (the gateway default applies).
    """
    resolved: dict[str, Any] = {}
    for name in SETTING_NAMES:
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
