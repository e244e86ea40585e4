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
5. an object the file wrote (`origin: config`) that disappears from the
   file is removed, and so is an org the file created that it no longer
   declares (`turnout.tenancy.prune`): the file is the source of truth for
   what it owns. What the admin API created or edited is never removed.

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

from turnout.config import Config, CustomEndpointConfig, KeyConfig, OrgConfig, SquadConfig
from turnout.config.findings import report
from turnout.core.scopes import ScopeSettings
from turnout.errors import ConfigError
from turnout.rules.ssrf import AllowList, UnsafeURL, check_base_url
from turnout.state.tenant_store import CAS_ATTEMPTS, TenantStore, WriteConflict
from turnout.stored.orgs import EndpointDoc, KeyDoc, Meta, OrgDoc, ProviderKeyDoc, SquadDoc
from turnout.tenancy.ceilings import ceiling_of
from turnout.tenancy.orgs import hash_token, lookup_prefix, validate_org
from turnout.tenancy.prune import prune, prune_undeclared
from turnout.vault import (
    Binding,
    Sealed,
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


class _Merge:
    """The steps of merging one org of the file into its stored document (module rules 1–5), one
    per kind of object; each returns the objects of its kind as merged and records the paths it
    created or updated (`changed`) and the operator's ceilings the file's settings set."""

    def __init__(self, current: OrgDoc | None, org_id: str, vault: Vault, now_s: float) -> None:
        self.org_id = org_id
        self.base = f"orgs.{org_id}"
        self.doc = current or OrgDoc(id=org_id, created_s=now_s)
        self.fresh = current is None
        self.vault = vault
        self.now_s = now_s
        self.changed: list[str] = []
        self.ceilings = dict(self.doc.ceilings)  # the file's limits and budgets are the operator's ceilings

    def _take(self, path: str, meta: Meta | None, value: Any) -> Meta | None:
        """The `Meta` to store when the file's `value` at `path` is applied (module rules 1–4), or
        None when it is not; an applied path is recorded in `changed`."""
        fp = fingerprint(value)
        if path in self.doc.tombstones or (meta is not None and (meta.origin != "config" or meta.applied == fp)):
            return None
        self.changed.append(path)
        return Meta(origin="config", applied=fp, updated_s=self.now_s)

    def _seal(self, path: str, secret: str, binding: Binding) -> Sealed:
        """`secret` sealed for `binding`.

        Raises:
            ConfigError: no vault key (`{base}.{path}: ...`).
        """
        try:
            return self.vault.seal(secret, binding)
        except VaultUnavailable as exc:
            raise ConfigError(f"{self.base}.{path}: {exc}") from None

    def _ceiling(self, path: str, of: ScopeSettings) -> None:
        """The operator's ceiling at `path` is what the file's settings `of` set, or none."""
        found = ceiling_of(of)
        self.ceilings.pop(path, None)
        if found is not None:
            self.ceilings[path] = found

    def settings(self, settings: ScopeSettings) -> tuple[ScopeSettings, Meta | None]:
        """The org's own settings and their `Meta`."""
        meta = self._take("settings", None if self.fresh else self.doc.settings_meta, settings)
        if meta is None:
            return self.doc.settings, self.doc.settings_meta
        self._ceiling("org", settings)
        return settings, meta

    def squads(self, squads: dict[str, SquadConfig]) -> dict[str, SquadDoc]:
        """The org's squads, the file's merged in."""
        merged = dict(self.doc.squads)
        for name, squad in squads.items():
            meta = self._take(f"squads.{name}", merged[name].meta if name in merged else None, squad)
            if meta is not None:
                merged[name] = SquadDoc(settings=squad.settings, meta=meta)
                self._ceiling(f"squads.{name}", squad.settings)
        return merged

    def keys(self, keys: list[KeyConfig]) -> dict[str, KeyDoc]:
        """The org's gateway keys, the file's merged in (only their digests kept).

        Raises:
            ConfigError: a key name used twice in the file's org.
        """
        merged = dict(self.doc.keys)
        seen: set[str] = set()
        for i, key in enumerate(keys):
            if key.name in seen:
                raise ConfigError(f"{self.base}.keys[{i}].name: key name {key.name!r} is used twice in this org")
            seen.add(key.name)
            old = merged.get(key.name)
            meta = self._take(f"keys.{key.name}", old.meta if old else None, key)
            if meta is not None:
                merged[key.name] = KeyDoc(
                    name=key.name,
                    digest=hash_token(key.key),
                    prefix=lookup_prefix(key.key),
                    squad=key.squad,
                    admin=key.admin,
                    settings=key.settings,
                    created_s=old.created_s if old else self.now_s,
                    meta=meta,
                )
                self._ceiling(f"keys.{key.name}", key.settings)
        return merged

    def provider_keys(self, provider_keys: dict[str, str]) -> dict[str, ProviderKeyDoc]:
        """The org's BYOK keys, the file's merged in, sealed."""
        merged = dict(self.doc.provider_keys)
        for provider, secret in provider_keys.items():
            path = f"provider_keys.{provider}"
            meta = self._take(path, merged[provider].meta if provider in merged else None, [provider, secret])
            if meta is not None:
                binding = provider_key_binding(self.org_id, provider)
                merged[provider] = ProviderKeyDoc(secret=self._seal(path, secret, binding), meta=meta)
        return merged

    def endpoints(self, endpoints: dict[str, CustomEndpointConfig], allow: AllowList) -> dict[str, EndpointDoc]:
        """The org's custom endpoints, the file's merged in, their key and header values sealed.

        Raises:
            ConfigError: a base URL the SSRF guard refuses (`{base}.custom_endpoints.<id>.base_url`).
        """
        merged = dict(self.doc.custom_endpoints)
        for name, endpoint in endpoints.items():
            path = f"custom_endpoints.{name}"
            meta = self._take(path, merged[name].meta if name in merged else None, _endpoint_fields(endpoint))
            if meta is None:
                continue
            try:
                url = check_base_url(endpoint.base_url, allow)
            except UnsafeURL as exc:
                raise ConfigError(f"{self.base}.{path}.base_url: refused: {exc}") from None
            key = endpoint.api_key
            sealed = self._seal(f"{path}.api_key", key, endpoint_binding(self.org_id, name)) if key else None
            headers = (
                None
                if endpoint.headers is None
                else {
                    h: self._seal(f"{path}.headers.{h}", v, header_binding(self.org_id, name, h, endpoint=True))
                    for h, v in endpoint.headers.items()
                }
            )
            merged[name] = EndpointDoc(base_url=url, secret=sealed, meta=meta, auth=endpoint.auth, headers=headers)
        return merged


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
    step = _Merge(current, org_id, vault, now_s)
    settings, settings_meta = step.settings(cfg.settings)
    merged = msgspec.structs.replace(
        step.doc,
        settings=settings,
        settings_meta=settings_meta,
        squads=step.squads(cfg.squads),
        keys=step.keys(cfg.keys),
        provider_keys=step.provider_keys(cfg.provider_keys),
        custom_endpoints=step.endpoints(cfg.custom_endpoints, allow),
        ceilings=step.ceilings,
    )
    merged, removed = prune(merged, cfg)
    step.changed += [f"{path} (removed: no longer in the file)" for path in removed]
    if not step.changed and current is not None:
        return current, []
    try:
        validate_org(merged, config, allow)
    except ConfigError as exc:  # each error's path is the org's; named from the file's root
        errors = [f"{step.base}.{error}" for error in exc.errors]
        raise ConfigError(report(errors), errors) from None
    return merged, step.changed


async def bootstrap(
    store: TenantStore, config: Config, vault: Vault, allow: AllowList, *, clock: Callable[[], float] = time.time
) -> dict[str, list[str]]:
    """Merge every org of the file into Redis (idempotent; safe from many ingresses at once).

    Then every stored org the file does not declare loses what the file wrote
    (`turnout.tenancy.prune`): an org the file created goes whole.

    Returns:
        Org id -> the paths the file created, updated or removed (empty lists left out).

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
    undeclared = sorted(set(await store.org_versions()) - set(config.raw.orgs))
    for org_id in undeclared:
        removed = await _prune_undeclared(store, org_id)
        if removed:
            applied[org_id] = removed
            what = "the whole org (every key, API-created ones too)" if removed == ["org"] else ", ".join(removed)
            log.info(
                "tenancy: org %s: removed %s (written by a configuration file that no longer declares it)", org_id, what
            )
    return applied


async def _prune_undeclared(store: TenantStore, org_id: str) -> list[str]:
    """Remove what the file wrote in org `org_id`, which the file does not declare (no tombstone).

    Returns:
        The removed paths (`org` when the whole org went; empty when nothing was removed).

    Raises:
        WriteConflict: the org kept changing.
        StateUnavailable: Redis is unreachable.
    """
    for _ in range(CAS_ATTEMPTS):
        doc, version = await store.load(org_id)
        if doc is None:
            return []
        new, removed = prune_undeclared(doc)
        if not removed:
            return []
        if await store.write(new, org_id, version, tombstone=False) is not None:
            return removed
    raise WriteConflict(f"org {org_id!r} kept changing while the file's removals were written; retry")
