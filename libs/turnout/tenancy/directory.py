"""The tenant directory: each process's snapshot of the tenancy store.

Owns: the in-memory view every ingress and worker serves from — gateway keys
by lookup prefix with their resolved identities (SPEC §6 scopes), each org's
BYOK keys and custom endpoints for the router (`turnout.tenancy.byok`) — and keeping
it fresh: a subscription to the invalidation channel re-reads an org as soon
as it is written, and a re-check of the config version every `poll_s`
(1 s) catches anything the subscription missed.

Propagation bound: a write (new key, revocation, settings, provider key) is
in force in every connected process within `poll_s` + one Redis round trip
of the write, typically milliseconds through pub/sub; documented as 2 s.
While Redis is unreachable a process keeps serving its last snapshot.
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping

import msgspec
from redis.asyncio import Redis

from turnout.config import Config, ProviderConfig, egress_policy
from turnout.core.types import Target
from turnout.errors import ConfigError
from turnout.rules.ssrf import AllowList
from turnout.scrub import Scrubber
from turnout.state import keys
from turnout.state.epoch import EpochTracker
from turnout.state.follow import follow, stop_task, wait_ready
from turnout.state.tenant_store import TenantStore
from turnout.stored.orgs import OrgDoc
from turnout.tenancy.identity import Identity
from turnout.tenancy.orgs import custom_provider, hash_token, identity_of, lookup_prefix
from turnout.vault import (
    Binding,
    Sealed,
    SecretUnreadable,
    Vault,
    VaultUnavailable,
    endpoint_binding,
    header_binding,
    provider_key_binding,
)

log = logging.getLogger("turnout.tenancy")

POLL_S = 1.0
"""Seconds between re-checks of the config version (the propagation bound's main term)."""


class _KeyEntry(msgspec.Struct, frozen=True, kw_only=True):
    digest: str
    expires_s: float | None
    identity: Identity


class OrgCredentials:
    """One org's BYOK keys and custom endpoints (`turnout.tenancy.byok.TenantCredentials`).

    Secrets are opened only when an attempt needs one, never cached here.
    """

    def __init__(self, doc: OrgDoc, vault: Vault) -> None:
        self._doc = doc
        self._vault = vault
        self.own_providers = frozenset(doc.provider_keys)
        self._endpoint_prefix = custom_provider(doc.id, "")

    def _open(self, what: str, sealed: Sealed, binding: Binding) -> str | None:
        try:
            return self._vault.open(sealed, binding)
        except (VaultUnavailable, SecretUnreadable) as exc:
            log.error(
                "tenancy: org %s: %s cannot be used (attempts skipped as no credential): %s", self._doc.id, what, exc
            )
            return None

    def own_key(self, provider: str) -> str | None:
        """The org's key for `provider`, or None (also when it does not open for this org and provider)."""
        stored = self._doc.provider_keys.get(provider)
        if stored is None:
            return None
        return self._open(f"provider key {provider}", stored.secret, provider_key_binding(self._doc.id, provider))

    def endpoint(self, provider: str) -> ProviderConfig | None:
        """The custom endpoint named by provider `custom:<org>:<id>`, or None."""
        if not provider.startswith(self._endpoint_prefix):
            return None  # another org's endpoint is never reachable from this org
        stored = self._doc.custom_endpoints.get(provider[len(self._endpoint_prefix) :])
        if stored is None:
            return None
        api_key = ""
        if stored.secret is not None:
            name = provider[len(self._endpoint_prefix) :]
            opened = self._open(f"custom endpoint {provider}", stored.secret, endpoint_binding(self._doc.id, name))
            if opened is None:
                return None
            api_key = opened
        headers: dict[str, str] | None = None
        if stored.headers is not None:
            name = provider[len(self._endpoint_prefix) :]
            headers = {}
            for header, sealed in stored.headers.items():
                value = self._open(
                    f"custom endpoint {provider} header {header}",
                    sealed,
                    header_binding(self._doc.id, name, header, endpoint=True),
                )
                if value is None:
                    return None  # called without a header it was registered with, it would answer for another caller
                headers[header] = value
        return ProviderConfig(
            kind="openai_compatible", base_url=stored.base_url, api_key=api_key, auth=stored.auth, headers=headers
        )


class _OrgView(msgspec.Struct, frozen=True, kw_only=True):
    doc: OrgDoc
    version: int
    entries: tuple[tuple[str, _KeyEntry], ...]


OPERATOR_KEY_ENV = "TURNOUT_OPERATOR_KEY"


def static_secrets(config: Config, env: Mapping[str, str]) -> list[str]:
    """Credentials known without Redis: the platform provider keys, the file's gateway, BYOK and
    custom endpoint keys, the operator key and the metrics token (what the process's `Scrubber` starts with)."""
    found = [s for p in config.raw.providers.values() for s in p.secrets()]
    for org in config.raw.orgs.values():
        found += [k.key for k in org.keys]
        found += list(org.provider_keys.values())
        found += [e.api_key or "" for e in org.custom_endpoints.values()]
        found += [v for e in org.custom_endpoints.values() for v in (e.headers or {}).values()]
    found.append(env.get(OPERATOR_KEY_ENV, ""))
    found.append(env.get("TURNOUT_METRICS_TOKEN", ""))
    return [s for s in found if s]


def directory_from_env(config: Config, redis: Redis, env: Mapping[str, str]) -> TenantDirectory:
    """The directory of one process: vault from `TURNOUT_SECRET_KEY`, the egress policy
    (`egress_policy`), a scrubber knowing `static_secrets`.

    Raises:
        ValueError: a malformed `TURNOUT_SECRET_KEY` or `TURNOUT_SSRF_ALLOW` (never echoes a key).
    """
    return TenantDirectory(
        config,
        TenantStore(redis),
        Vault.from_env(env),
        egress_policy(config, env),
        scrubber=Scrubber(static_secrets(config, env)),
    )


class TenantDirectory:
    """Authenticates gateway keys and hands out org credentials from a snapshot of Redis.

    Args:
        config: the validated configuration (catalog, gateway policy, ceilings).
        store: the tenancy store.
        vault: opens sealed secrets.
        allow: the SSRF allow-list (kept for the admin API).
        poll_s: seconds between version re-checks.
        clock: epoch seconds (key expiry).
        rng: draws the watch's reconnect jitter.
        sleep: waits the watch's reconnect backoff (seconds).
        scrubber: the process's egress scrubber; after each refresh it knows
            every org's BYOK and endpoint keys and gateway key prefixes
            (group `org:<id>`). Default: one knowing the catalog's keys.
    """

    def __init__(
        self,
        config: Config,
        store: TenantStore,
        vault: Vault,
        allow: AllowList,
        *,
        poll_s: float = POLL_S,
        clock: Callable[[], float] = time.time,
        scrubber: Scrubber | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._rng = rng or random.Random()
        self._sleep = sleep
        self.config = config
        self.store = store
        self.vault = vault
        self.allow = allow
        self._poll_s = poll_s
        self._clock = clock
        self._orgs: dict[str, _OrgView] = {}
        self._credentials: dict[str, OrgCredentials] = {}
        self._by_prefix: dict[str, tuple[_KeyEntry, ...]] = {}
        self._version = -1
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Event | None = None
        self._fatal: ConfigError | None = None
        self.scrubber = scrubber or Scrubber(s for p in config.raw.providers.values() for s in p.secrets())

    @property
    def version(self) -> int:
        """The config version this snapshot reflects (-1 before the first load)."""
        return self._version

    @property
    def loaded(self) -> bool:
        """True once the keys were read from Redis at least once (`version` >= 0); until then every
        token is unknown, which says nothing of whether it is valid (the ingress answers 503)."""
        return self._version >= 0

    def authenticate(self, token: str | None) -> Identity | None:
        """The identity of a bearer token; None when unknown, revoked or expired (one answer for all).

        Found by the token's clear prefix, then confirmed by comparing
        SHA-256 digests in constant time.
        """
        if not token:
            return None
        return self.authenticate_digest(lookup_prefix(token), hash_token(token))

    def authenticate_digest(self, prefix: str, digest: str) -> Identity | None:
        """The identity of the key with clear lookup `prefix` and SHA-256 `digest` (what a dashboard
        session holds instead of the key); None when unknown, revoked or expired."""
        candidates = self._by_prefix.get(prefix, ())
        if not candidates:
            return None
        now_s = self._clock()
        for entry in candidates:
            if hmac.compare_digest(entry.digest, digest):
                return entry.identity if entry.expires_s is None or now_s < entry.expires_s else None
        return None

    def credentials(self, org: str) -> OrgCredentials | None:
        """The org's BYOK keys and custom endpoints (`turnout.tenancy.byok.CredentialSource`)."""
        return self._credentials.get(org)

    def custom_targets(self, org: str) -> list[Target]:
        """The custom endpoint targets that `org`'s usable keys may route to (health views)."""
        view = self._orgs.get(org)
        found: dict[str, Target] = {}
        for _, entry in view.entries if view is not None else ():
            for target in entry.identity.settings.custom_targets.values():
                found.setdefault(target.key, target)
        return list(found.values())

    def _view(self, doc: OrgDoc, version: int) -> _OrgView:
        now_s = self._clock()
        entries = tuple(
            (
                key.prefix,
                _KeyEntry(digest=key.digest, expires_s=key.expires_s, identity=identity_of(doc, key, self.config)),
            )
            for key in doc.keys.values()
            if key.revoked_s is None and key.usable(now_s)
        )
        return _OrgView(doc=doc, version=version, entries=entries)

    async def refresh(self) -> bool:
        """Re-read the orgs written since the last refresh. Returns True when anything changed.

        Raises:
            StateUnavailable: Redis is unreachable.
        """
        version = await self.store.version()
        if version == self._version:
            return False
        versions = await self.store.org_versions()
        changed = [org for org, v in versions.items() if org not in self._orgs or self._orgs[org].version != v]
        loaded = await self.store.load_many(changed)
        orgs = {org: view for org, view in self._orgs.items() if org in versions}
        for org, (doc, org_version) in loaded.items():
            orgs[org] = self._view(doc, org_version)
        index: dict[str, list[_KeyEntry]] = {}
        for view in orgs.values():
            for prefix, entry in view.entries:
                index.setdefault(prefix, []).append(entry)
        self._by_prefix = {p: tuple(e) for p, e in index.items()}
        self._credentials = {
            org: self._credentials[org]
            if org not in loaded and org in self._credentials
            else OrgCredentials(view.doc, self.vault)
            for org, view in orgs.items()
        }
        self.scrubber.update(
            {f"org:{org}": self._secrets_of(doc) for org, (doc, _) in loaded.items()},
            forgotten=[f"org:{org}" for org in self._orgs if org not in orgs],
        )
        self._orgs = orgs
        self._version = version
        return True

    def _secrets_of(self, doc: OrgDoc) -> list[str]:
        """Every credential of `doc` in clear, for the scrubber: BYOK and endpoint keys (those that
        open), and the clear lookup prefix of each gateway key."""
        sealed = [(p.secret, provider_key_binding(doc.id, n)) for n, p in doc.provider_keys.items()]
        sealed += [(e.secret, endpoint_binding(doc.id, n)) for n, e in doc.custom_endpoints.items() if e.secret]
        sealed += [
            (v, header_binding(doc.id, n, h, endpoint=True))
            for n, e in doc.custom_endpoints.items()
            for h, v in (e.headers or {}).items()
        ]
        found = [k.prefix for k in doc.keys.values()]
        for item, binding in sealed:
            with contextlib.suppress(VaultUnavailable, SecretUnreadable):
                found.append(self.vault.open(item, binding, legacy=True))  # scrubbing more is harmless
        return found

    async def start(self, listen_redis: Redis, *, bootstrap: bool = False, wait_s: float = 5.0) -> None:
        """Start watching; wait up to `wait_s` for the first load.

        Args:
            listen_redis: a client without a socket timeout (pub/sub).
            bootstrap: first merge the configuration file's `orgs:` into
                Redis (`turnout.tenancy.bootstrap`; the ingress does, workers do not).
            wait_s: how long to wait for Redis before serving with an empty
                directory (`loaded` False: the ingress answers a key 503) while reconnecting.

        Raises:
            ConfigError: the file's orgs cannot be merged (path named).
        """
        from turnout.tenancy.bootstrap import bootstrap as merge_file

        async def run_bootstrap() -> None:
            await merge_file(self.store, self.config, self.vault, self.allow, clock=self._clock)

        self._ready = asyncio.Event()
        self._task = asyncio.create_task(
            self._watch(listen_redis, run_bootstrap if bootstrap else None), name="turnout-tenancy-watch"
        )
        ready = await wait_ready(self._ready, wait_s)
        if self._fatal is not None:
            raise self._fatal
        if not ready:
            log.warning("tenancy: Redis not reachable yet; a gateway key is answered 503 until the first load")

    async def stop(self) -> None:
        """Stop watching."""
        await stop_task(self._task)

    async def _watch(self, listen_redis: Redis, bootstrap: Callable[[], Awaitable[object]] | None) -> None:
        """Keep the snapshot fresh until cancelled: after each (re)subscription (the file's orgs
        merged first, once) and on every invalidation message or `poll_s` without one."""
        assert self._ready is not None
        try:
            await follow(
                listen_redis,
                keys.TENANCY_CHANNEL,
                refresh=self.refresh,
                ready=self._ready,
                poll_s=self._poll_s,
                what="tenancy",
                first=bootstrap,
                rng=self._rng,
                sleep=self._sleep,
                epoch=EpochTracker(),
            )
        except ConfigError as exc:
            self._fatal = exc
            self._ready.set()
