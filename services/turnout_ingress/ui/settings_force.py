"""What is in force for a key, beside its settings form: each field's value and the scope it comes from.

Owns: `in_force` — for a key, per form field (`turnout_ingress.ui.settings_form.FIELDS`), the value
its requests get and where from: `org`, `squad <name>`, `key` (the highest scope that sets a
setting wins, `turnout.core.scopes.resolve_settings`) or `gateway` (the gateway's policy, clamped to
the ceilings, as `turnout.tenancy.orgs.identity_of` builds it). A key's own setting that a higher
scope overrides is thus visibly not in force. `limits` apply from every scope at once and are left
out (the page lists the operator's ceilings).
Must not import: the UI's routes, FastAPI.
"""

from __future__ import annotations

from typing import Any

import msgspec

from turnout.core.policy import Ceilings, Policy, PolicyOverrides, clamp_policy, merge_policy
from turnout.core.scopes import ScopeSettings, resolve_settings
from turnout_ingress.ui.settings_form import FIELDS, leaf, text_of


def _source(name: str, scopes: list[tuple[str, ScopeSettings]]) -> str | None:
    """The scope whose `name` setting is in force (the first that sets it), or None."""
    for label, settings in scopes:
        if getattr(settings, name) is not msgspec.UNSET:
            return label
    return None


def in_force(
    org: ScopeSettings,
    squad: tuple[str, ScopeSettings] | None,
    key: ScopeSettings,
    gateway: Policy,
    ceilings: Ceilings,
) -> dict[str, tuple[str, str]]:
    """Per form field but `limits`: (the text of the value in force, its source scope).

    Args:
        org / squad / key: each scope's own settings (`squad`: its name and settings, or None).
        gateway: the gateway's policy (the configuration's `policy:`).
        ceilings: the operator's ceilings the policy is clamped to.
    """
    scopes = [("org", org), *([(f"squad {squad[0]}", squad[1])] if squad else []), ("key", key)]
    resolved = resolve_settings(org, squad[1] if squad else None, key)
    policy = gateway
    if isinstance(resolved.policy, PolicyOverrides):
        policy = merge_policy(policy, resolved.policy)
    policy, _ = clamp_policy(policy, ceilings)
    values: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(resolved))
    values["policy"] = msgspec.json.decode(msgspec.json.encode(policy))
    own: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(resolved.policy)) if resolved.policy else {}
    found: dict[str, tuple[str, str]] = {}
    for field in FIELDS:
        if field.setting == "limits":
            continue
        source = _source(field.setting, scopes)
        if field.setting == "policy" and leaf(own, field.name.removeprefix("policy.")) is None:
            source = "gateway"
        found[field.name] = (text_of(field, leaf(values, field.name)), source or "gateway")
    return found
