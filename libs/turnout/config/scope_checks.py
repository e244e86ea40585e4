"""The rules of a scope's settings beyond their types: the models they name, fallback cycles,
a policy within the ceilings (SPEC §4, §6, §11).

Owns: what `settings:` of an org, a squad or a gateway key may say — every
model a setting names is in the catalog (or a `custom:<endpoint>:<model>` of
the org's own endpoints), is not an embedding model, `fallbacks:` hold no
cycle, a strategy names each rule once, and a policy merged over the gateway's
stays within the ceilings. The file's orgs and the admin API's edits go
through the same rules (`check_scope_settings`).
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

from collections.abc import Mapping

from turnout.config.class_checks import check_comparable
from turnout.config.documents import Config, OrgConfig, RawConfig, embedding_models
from turnout.config.findings import Findings
from turnout.config.providers import ModelConfig
from turnout.core.model_types import naming_embedding_models
from turnout.core.policy import (
    Ceilings,
    FallbackOverrides,
    FallbackPolicy,
    Policy,
    PolicyOverrides,
    clamp_policy,
    clamp_reason,
    merge_policy,
)
from turnout.core.scopes import MODEL_MAPS, ScopeSettings, as_model_map, named_models
from turnout.errors import ConfigError
from turnout.rules.text import check_model


def check_policy(found: Findings, path: str, partial: PolicyOverrides, base: Policy, ceilings: Ceilings) -> None:
    """`partial` merged over `base` is within `ceilings`: each value outside named (`{path}.<field>`)."""
    _, clamps = clamp_policy(merge_policy(base, partial), ceilings)
    for c in clamps:
        found.add(f"{path}.{c.path}: {clamp_reason(c)}")


def check_models(
    found: Findings, path: str, models: list[str], catalog: Mapping[str, ModelConfig], org: OrgConfig | None
) -> None:
    """Each entry of the list at `path` is a catalog model, or a well-formed `custom:` entry naming
    one of `org`'s custom endpoints (`{path}[i]` named)."""
    for i, model in enumerate(models):
        if not found.check(check_model, f"{path}[{i}]", model):
            continue
        if model.startswith("custom:"):
            parts = model.split(":", 2)  # the model name may hold colons (`llama3:8b`)
            if len(parts) != 3 or not parts[1] or not parts[2]:
                found.add(f"{path}[{i}]: malformed entry {model!r}; expected custom:<provider_key_id>:<model_name>")
            elif org is None or parts[1] not in org.custom_endpoints:
                found.add(f"{path}[{i}]: {model!r} names no custom endpoint of this org")
        elif model not in catalog:
            found.add(f"{path}[{i}]: unknown model {model!r} (not in `models`)")


def _check_cycles(path: str, model_map: Mapping[str, tuple[str, ...]]) -> None:
    """A fallback map holds no cycle (a model reached again from itself).

    Raises:
        ConfigError: `{path}: fallback cycle a -> b -> a`, the first cycle found.
    """
    graph = {k: v for k, v in model_map.items() if k != "*"}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in graph.get(node, ()):
            if nxt == node or state.get(nxt) == 1:
                cycle = trail[trail.index(nxt) :] + [nxt] if nxt in trail else [node, nxt]
                raise ConfigError(f"{path}: fallback cycle {' -> '.join(cycle)}")
            if nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for start in graph:
        if start not in state:
            visit(start, [start])


def _check_fallback_maps(
    found: Findings, path: str, settings: ScopeSettings, raw: RawConfig, org: OrgConfig | None
) -> None:
    """Each fallback map's keys and lists name catalog models; `fallbacks` holds no cycle."""
    for name in MODEL_MAPS:
        value = getattr(settings, name)
        model_map = as_model_map(value)
        for key, models in model_map.items():
            sub = f"{path}.{name}" if isinstance(value, list) else f"{path}.{name}.{key}"
            if key != "*" and key not in raw.models:
                found.add(f"{path}.{name}: unknown model {key!r} (not in `models`)")
            check_models(found, sub, list(models), raw.models, org)
        if name == "fallbacks":
            found.check(_check_cycles, f"{path}.{name}", model_map)


def _check_strategy(found: Findings, path: str, settings: ScopeSettings, raw: RawConfig) -> None:
    """Each strategy rule is named once and names catalog models."""
    if not isinstance(settings.strategy, list):
        return
    names: set[str] = set()
    for i, rule in enumerate(settings.strategy):
        if rule.name in names:
            found.add(f"{path}.strategy[{i}].name: rule {rule.name!r} is declared twice")
        names.add(rule.name)
        for what, model in (("model", rule.model), ("fallback", rule.fallback)):
            if model is not None and model not in raw.models:
                found.add(f"{path}.strategy[{i}].{what}: unknown model {model!r} (not in `models`)")


def check_scope(
    found: Findings, path: str, settings: ScopeSettings, raw: RawConfig, policy: Policy, org: OrgConfig | None
) -> None:
    """Every rule of one scope's settings at `path` (module doc), against `raw`'s catalog and
    ceilings and the gateway's `policy`; `org`: the org whose custom endpoints it may name."""
    refused = naming_embedding_models(((f"{path}.{p}", m) for p, m in named_models(settings)), embedding_models(raw))
    if refused is not None:
        found.add(refused)
    if isinstance(settings.reroutes, list):
        check_models(found, f"{path}.reroutes", settings.reroutes, raw.models, org)
    _check_fallback_maps(found, path, settings, raw, org)
    if isinstance(settings.policy, PolicyOverrides):
        check_policy(found, f"{path}.policy", settings.policy, policy, raw.ceilings)
        fallback = settings.policy.fallback
        if isinstance(fallback, FallbackOverrides):
            for field in ("models", "only"):  # the same check as `settings.fallbacks`
                if isinstance(named := getattr(fallback, field), tuple):
                    check_models(found, f"{path}.policy.fallback.{field}", list(named), raw.models, org)
            # this scope's own fields only: an `only` may well leave out the gateway's `models`
            check_comparable(found, f"{path}.policy", FallbackPolicy(**fallback.set_fields()), raw.models)
    _check_strategy(found, path, settings, raw)


def check_scope_settings(path: str, settings: ScopeSettings, config: Config, org: OrgConfig | None) -> None:
    """Validate one scope's settings as the file's are (the admin API's entry point, SPEC §11).

    Args:
        path: where the settings sit, for messages (`squads.research.settings`).
        settings: the scope's settings.
        config: the validated configuration (catalog, gateway policy, ceilings).
        org: the org whose custom endpoints `custom:` entries may name.

    Raises:
        ConfigError: every problem, one per line, each naming its path (unknown
            model, malformed `custom:` entry, fallback cycle, policy over a ceiling).
    """
    found = Findings()
    check_scope(found, path, settings, config.raw, config.policy, org)
    found.raise_any()
