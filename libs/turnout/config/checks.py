"""Every rule of a configuration document beyond its types, each broken one reported (SPEC §11).

Owns: the order the sections are checked in, the rules of the gateway's own
sections (`routing:`, `breaker:`, `policy:` within `ceilings:`), and which
rules still run when a section did not convert: a rule reads only sections
that did (`broken` names the others), so a file with a type error in
`gateway:` still has its offers checked, and no rule reports a follow-on of a
type error already reported. The sections' rules are in `provider_checks`,
`scope_checks` and `org_checks`.
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

from turnout.config.class_checks import check_classes, check_comparable
from turnout.config.documents import RawConfig, embedding_models
from turnout.config.findings import Findings
from turnout.config.org_checks import check_orgs
from turnout.config.provider_checks import check_models_section, check_providers
from turnout.config.scope_checks import check_models
from turnout.core.model_types import naming_embedding_models
from turnout.core.policy import Policy, clamp_policy, clamp_reason
from turnout.rules.ssrf import AllowList


def _check_gateway_sections(found: Findings, raw: RawConfig, broken: frozenset[str]) -> None:
    """`routing.price_mix` weighs something; `breaker.max_cooldown_s` is at least `cooldown_s`."""
    mix = raw.routing.price_mix
    if "routing" not in broken and (mix.input < 0 or mix.output < 0 or mix.input + mix.output <= 0):
        found.add("routing.price_mix: weights must be at least 0 and not both 0")
    b = raw.breaker
    if "breaker" not in broken and b.max_cooldown_s < b.cooldown_s:
        found.add(f"breaker.max_cooldown_s: must be at least cooldown_s ({b.cooldown_s:g} s)")


def _check_gateway_policy(found: Findings, raw: RawConfig, policy: Policy) -> None:
    """`policy:` within `ceilings:`, its fallback models (`models`, `only`) in the catalog and none an
    embedding model, `comparable` and `only` able to take effect (`check_comparable`)."""
    _, clamps = clamp_policy(policy, raw.ceilings)
    for c in clamps:
        found.add(f"policy.{c.path}: {clamp_reason(c)}")
    for field in ("models", "only"):
        named = list(getattr(policy.fallback, field))
        check_models(found, f"policy.fallback.{field}", named, raw.models, None)
        refused = naming_embedding_models(
            ((f"policy.fallback.{field}[{i}]", m) for i, m in enumerate(named)), embedding_models(raw)
        )
        if refused is not None:
            found.add(refused)
    check_comparable(found, "policy", policy.fallback, raw.models)


def check_document(
    found: Findings,
    raw: RawConfig,
    policy: Policy,
    allow: AllowList | None = None,
    broken: frozenset[str] = frozenset(),
) -> None:
    """Every rule of `raw` beyond its types, each broken one added to `found`.

    Args:
        found: the document's errors so far (its type errors).
        raw: the document; a section named in `broken` holds its default.
        policy: the gateway-wide policy (`raw.policy` over the SPEC's defaults).
        allow: the egress policy the orgs' custom endpoint base URLs are checked against, as
            the ingress does when it merges them into Redis (None: a catalog edit, orgs
            checked at load).
        broken: the top-level sections (`RawConfig` field names) that did not convert: the
            rules reading them are skipped.
    """

    def whole(*sections: str) -> bool:
        return broken.isdisjoint(sections)

    if whole("models") and not raw.models:
        found.add("models: the catalog is empty; declare at least one model with an offer")
    _check_gateway_sections(found, raw, broken)
    if whole("providers"):
        check_providers(found, raw.providers)
    if whole("providers", "models"):
        check_models_section(found, raw.models, raw.providers)
    if whole("models"):
        check_classes(found, raw.models)
    if whole("policy", "ceilings", "models"):
        _check_gateway_policy(found, raw, policy)
    if whole("providers", "models", "policy", "ceilings", "orgs"):
        check_orgs(found, raw, policy, allow)
