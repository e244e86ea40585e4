"""The rules of `orgs:` beyond their types (SPEC §6, §11).

Owns: what the file may say of an org before it is merged into the tenancy
store (`turnout.tenancy.bootstrap`): ids fit for a header, BYOK keys only for
known providers that take a key, custom endpoints whose base URL passes the
SSRF guard (`turnout.rules.ssrf`, the policy the fleet applies), squads,
gateway keys named once and declared once across the file, and every
scope's settings (`turnout.config.scope_checks`).
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

from turnout.aws import config_rules as aws_rules
from turnout.config.documents import CustomEndpointConfig, OrgConfig, RawConfig
from turnout.config.findings import Findings
from turnout.config.provider_checks import check_sendable
from turnout.config.providers import SERVICE_ACCOUNT_ONLY, TOKEN_KINDS
from turnout.config.scope_checks import check_scope
from turnout.core.policy import Policy
from turnout.rules.ssrf import AllowList, UnsafeURL, check_base_url
from turnout.rules.text import check_id, check_secret, check_url


def _check_provider_keys(found: Findings, base: str, org: OrgConfig, raw: RawConfig) -> None:
    """Each BYOK key names a provider of the file that takes a key, and is of its form."""
    for provider_name, secret in org.provider_keys.items():
        path = f"{base}.provider_keys.{provider_name}"
        provider = raw.providers.get(provider_name)
        if provider is None:
            found.add(f"{path}: unknown provider")
        elif provider.kind in TOKEN_KINDS:
            found.add(f"{path}: {SERVICE_ACCOUNT_ONLY}")
        elif found.check(check_secret, path, secret):
            found.check(aws_rules.check_key, path, provider.kind, secret)


def _check_endpoint(
    found: Findings, path: str, name: str, endpoint: CustomEndpointConfig, allow: AllowList | None
) -> None:
    """One custom endpoint at `path`; `allow`: check its base URL as the fleet does when it
    merges the org (None: not checked)."""
    if ":" in name:  # `custom:<endpoint>:<model>` entries split on it
        found.add(f"{path}: an endpoint id cannot contain ':'")
    else:
        found.check(check_id, path, name)
    if found.check(check_url, f"{path}.base_url", endpoint.base_url) and allow is not None:
        try:
            check_base_url(endpoint.base_url, allow)
        except UnsafeURL as exc:
            found.add(f"{path}.base_url: refused: {exc}")
    if endpoint.api_key:
        found.check(check_secret, f"{path}.api_key", endpoint.api_key)
    found.check(check_sendable, path, endpoint.auth, endpoint.headers)


def _check_keys(found: Findings, base: str, org: OrgConfig, raw: RawConfig, policy: Policy, seen: set[str]) -> None:
    """The org's gateway keys: each named once in the org, each secret declared once in the file
    (`seen`: the secrets of the orgs before), of a known squad, with valid settings."""
    names: set[str] = set()
    for i, key in enumerate(org.keys):
        path = f"{base}.keys[{i}]"
        if found.check(check_id, f"{path}.name", key.name) and key.name in names:
            found.add(f"{path}.name: key name {key.name!r} is used twice in this org")
        names.add(key.name)
        if found.check(check_secret, f"{path}.key", key.key) and key.key in seen:
            found.add(f"{path}.key: the same gateway key is declared twice")
        seen.add(key.key)
        if key.squad is not None and key.squad not in org.squads:
            found.add(f"{path}.squad: unknown squad {key.squad!r}")
        check_scope(found, f"{path}.settings", key.settings, raw, policy, org)


def check_orgs(found: Findings, raw: RawConfig, policy: Policy, allow: AllowList | None) -> None:
    """Every rule of every org of `orgs:` (module doc), against the catalog and the gateway's
    `policy`; `allow`: the egress policy custom endpoints are checked against (None: not checked)."""
    seen_keys: set[str] = set()
    for org_name, org in raw.orgs.items():
        base = f"orgs.{org_name}"
        found.check(check_id, base, org_name)
        check_scope(found, f"{base}.settings", org.settings, raw, policy, org)
        _check_provider_keys(found, base, org, raw)
        for endpoint_name, endpoint in org.custom_endpoints.items():
            _check_endpoint(found, f"{base}.custom_endpoints.{endpoint_name}", endpoint_name, endpoint, allow)
        for squad_name, squad in org.squads.items():
            found.check(check_id, f"{base}.squads.{squad_name}", squad_name)
            check_scope(found, f"{base}.squads.{squad_name}.settings", squad.settings, raw, policy, org)
        _check_keys(found, base, org, raw, policy, seen_keys)
