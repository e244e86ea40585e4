"""Bootstrap: the configuration file's `orgs:` merged into the tenancy store (SPEC §11).

Owns: the merge rule between the file (GitOps) and run-time edits made
through the admin API, applied by every ingress at start. Per object — the
org's settings, each squad, each gateway key, each BYOK provider key, each
custom endpoint:

1. absent from Redis (and never deleted through the API): created from the
   file, marked `origin: config` with a fingerprint of the file's value;
2. present with `origin: config`: replaced by the file's value when that
   value changed since it was last applied (its fingerprint differs);
   otherwise untouched, so restarts are idempotent and write nothing;
3. present with `origin: api` (created or edited through the admin API):
   never touched by the file again — run-time edits win;
4. deleted through the API (a tombstone, or a deleted org): never
   re-created by the file;
5. an object that disappears from the file stays in Redis: the file never
   deletes (delete through the API).

The merged org is validated whole; a problem refuses the start with the
offending path (`orgs.acme.custom_endpoints.vllm.base_url: ...`).
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from typing import Any

import msgspec

from turnout.config import Config, CustomEndpointConfig, OrgConfig
from turnout.core.scopes import ScopeSettings
from turnout.errors import ConfigError
from turnout.state.tenant_store import TenantStore
from turnout.tenancy.ceilings import ceiling_of
from turnout.tenancy.orgs import (
    EndpointDoc,
    KeyDoc,
    Meta,
    OrgDoc,
    ProviderKeyDoc,
    SquadDoc,
    hash_token,
    lookup_prefix,
    validate_org,
)
from turnout.tenancy.ssrf import AllowList, UnsafeURL, check_base_url
from turnout.tenancy.vault import (
    Binding,
    Vault,
    VaultUnavailable,
    endpoint_binding,
    header_binding,
    provider_key_binding,
)

log = logging.getLogger("turnout.tenancy")


def _endpoint_fields(endpoint: CustomEndpointConfig) -> dict[str, Any]:
    """A file's custom endpoint as its fingerprint reads it: `auth` and `headers` only when set,
    so an endpoint without them fingerprints as before the fields existed (no re-apply on upgrade)."""
    fields = msgspec.structs.asdict(endpoint)
    for optional in ("auth", "headers"):
        if fields[optional] is None:
            del fields[optional]
    return fields


def fingerprint(value: Any) -> str:
    """A digest of a file value, to tell whether the file changed it since it was last applied."""
    return hashlib.sha256(b"turnout-config-object\0" + msgspec.json.encode(value)).hexdigest()[:32]


def _take(doc: OrgDoc, path: str, meta: Meta | None, fp: str) -> bool:
    if path in doc.tombstones:
        return False
    if meta is None:
        return True
    return meta.origin == "config" and meta.applied != fp


def merge_org(
    current: OrgDoc | None,
    org_id: str,
    cfg: OrgConfig,
    config: Config,
    vault: Vault,
    allow: AllowList,
    now_s: float,
) -> tuple[OrgDoc | None, list[str]]:
    """Merge one org of the file into its stored document (module rules 1–5).

    Args:
        current: the stored document, or None.
        org_id: the org id.
        cfg: the file's org.
        config: the whole validated configuration (for validation).
        vault: seals BYOK and endpoint keys.
        allow: the SSRF allow-list for endpoint base URLs.
        now_s: epoch seconds for timestamps.

    Returns:
        (the merged document — `current` itself when nothing changed — and
        the paths the file created or updated).

    Raises:
        ConfigError: a path under `orgs.<org_id>` names the problem.
    """
    base = f"orgs.{org_id}"
    doc = current or OrgDoc(id=org_id, created_s=now_s)
    changed: list[str] = []

    def meta(fp: str) -> Meta:
        return Meta(origin="config", applied=fp, updated_s=now_s)

    def seal(path: str, secret: str, binding: Binding) -> Any:
        try:
            return vault.seal(secret, binding)
        except VaultUnavailable as exc:
            raise ConfigError(f"{base}.{path}: {exc}") from None

    settings, settings_meta = doc.settings, doc.settings_meta
    ceilings = dict(doc.ceilings)  # the file's limits and budgets are the operator's ceilings

    def ceiling(path: str, of: ScopeSettings) -> None:
        found = ceiling_of(of)
        ceilings.pop(path, None)
        if found is not None:
            ceilings[path] = found

    fp = fingerprint(cfg.settings)
    if _take(doc, "settings", None if current is None else doc.settings_meta, fp):
        settings, settings_meta = cfg.settings, meta(fp)
        ceiling("org", cfg.settings)
        changed.append("settings")
    squads = dict(doc.squads)
    for name, squad in cfg.squads.items():
        fp = fingerprint(squad)
        if _take(doc, f"squads.{name}", squads[name].meta if name in squads else None, fp):
            squads[name] = SquadDoc(settings=squad.settings, meta=meta(fp))
            ceiling(f"squads.{name}", squad.settings)
            changed.append(f"squads.{name}")
    keys = dict(doc.keys)
    seen: set[str] = set()
    for i, key in enumerate(cfg.keys):
        if key.name in seen:
            raise ConfigError(f"{base}.keys[{i}].name: key name {key.name!r} is used twice in this org")
        seen.add(key.name)
        fp = fingerprint(key)
        old = keys.get(key.name)
        if _take(doc, f"keys.{key.name}", old.meta if old else None, fp):
            keys[key.name] = KeyDoc(
                name=key.name,
                digest=hash_token(key.key),
                prefix=lookup_prefix(key.key),
                squad=key.squad,
                admin=key.admin,
                settings=key.settings,
                created_s=old.created_s if old else now_s,
                meta=meta(fp),
            )
            ceiling(f"keys.{key.name}", key.settings)
            changed.append(f"keys.{key.name}")
    provider_keys = dict(doc.provider_keys)
    for provider, secret in cfg.provider_keys.items():
        fp = fingerprint([provider, secret])
        path = f"provider_keys.{provider}"
        if _take(doc, path, provider_keys[provider].meta if provider in provider_keys else None, fp):
            provider_keys[provider] = ProviderKeyDoc(
                secret=seal(path, secret, provider_key_binding(org_id, provider)), meta=meta(fp)
            )
            changed.append(path)
    endpoints = dict(doc.custom_endpoints)
    for name, endpoint in cfg.custom_endpoints.items():
        fp = fingerprint(_endpoint_fields(endpoint))
        path = f"custom_endpoints.{name}"
        if _take(doc, path, endpoints[name].meta if name in endpoints else None, fp):
            try:
                url = check_base_url(endpoint.base_url, allow)
            except UnsafeURL as exc:
                raise ConfigError(f"{base}.{path}.base_url: refused: {exc}") from None
            sealed = (
                seal(f"{path}.api_key", endpoint.api_key, endpoint_binding(org_id, name)) if endpoint.api_key else None
            )
            headers = (
                None
                if endpoint.headers is None
                else {
                    h: seal(f"{path}.headers.{h}", v, header_binding(org_id, name, h, endpoint=True))
                    for h, v in endpoint.headers.items()
                }
            )
            endpoints[name] = EndpointDoc(
                base_url=url, secret=sealed, meta=meta(fp), auth=endpoint.auth, headers=headers
            )
            changed.append(path)
    if not changed and current is not None:
        return current, []
    merged = msgspec.structs.replace(
        doc,
        settings=settings,
        settings_meta=settings_meta,
        squads=squads,
        keys=keys,
        provider_keys=provider_keys,
        custom_endpoints=endpoints,
        ceilings=ceilings,
    )
    try:
        validate_org(merged, config, allow)
    except ConfigError as exc:
        raise ConfigError(f"{base}.{exc}") from None
    return merged, changed


async def bootstrap(
    store: TenantStore, config: Config, vault: Vault, allow: AllowList, *, clock: Callable[[], float] = time.time
) -> dict[str, list[str]]:
    """Merge every org of the file into Redis (idempotent; safe from many ingresses at once).

    Returns:
        Org id -> the paths the file created or updated (empty lists left out).

    Raises:
        ConfigError: an org of the file cannot be merged (path named).
        StateUnavailable: Redis is unreachable.
    """
    applied: dict[str, list[str]] = {}
    for org_id, cfg in config.raw.orgs.items():
        if await store.deleted(org_id):
            log.info("tenancy: org %s was deleted through the admin API; the file does not re-create it", org_id)
            continue
        _, changed, _ = await store.update(
            org_id,
            lambda current, org_id=org_id, cfg=cfg: merge_org(  # type: ignore[misc]
                current, org_id, cfg, config, vault, allow, clock()
            ),
        )
        if changed:
            applied[org_id] = changed
            log.info("tenancy: org %s: applied from the file: %s", org_id, ", ".join(changed))
    return applied
