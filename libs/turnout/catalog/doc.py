"""The catalog document from a file and back (SPEC §11 `providers:` / `models:`).

Owns: building the stored catalog (`turnout.stored.catalog`: each model with
its offers, each provider with its base URL and a *reference* to its key,
never the key in clear) from a configuration file, the file's digest (to
tell a file already applied from a new one), and turning a document back
into a validated `Config` — with the very checks a file gets (`turnout.config`), so
an admin edit and a file obey the same rules.

Provider key references (`KeyRef.source`):
    `sealed`  the key sealed by the vault (`TURNOUT_SECRET_KEY`), bound to
              the provider (`platform_key_binding`); every process opens it.
    `env`     the environment variable `name` of each process; never one of
              Turnout's own (`TURNOUT_*`, `provider_rules`): refused when
              written, and read as no key if a stored document names one.
    `file`    the key the provider has in each process's own configuration
              file (a file applied while no `TURNOUT_SECRET_KEY` is set).
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping

import msgspec

from turnout.aws.config_rules import FIELDS as BEDROCK_FIELDS
from turnout.config import Config, ProviderConfig, with_catalog
from turnout.config.providers import ProbeConfig
from turnout.rules.provider_rules import check_key_env, key_env_refusal
from turnout.stored.catalog import CatalogDoc, KeyRef, ProviderEntry, doc_encoder
from turnout.vault import Binding, SecretUnreadable, Vault, VaultUnavailable, header_binding

log = logging.getLogger("turnout.catalog")

PLATFORM_ORG = ""
"""The `Binding.org` of the operator's own provider keys (no org id is empty)."""


def platform_key_binding(provider: str) -> Binding:
    """The place of the operator's (shared) key of `provider`: a sealed key opens only for it."""
    return Binding(org=PLATFORM_ORG, kind="provider_key", name=provider)


KIND_FIELDS = ("api_version", "region", "project", "location", "credentials_file")
"""The provider fields only some kinds take (`ProviderConfig`), stored and digested only when set."""


def kind_fields(provider: ProviderConfig | ProviderEntry) -> dict[str, str]:
    """`provider`'s `KIND_FIELDS` that are set (name -> value)."""
    return {name: value for name in KIND_FIELDS if (value := getattr(provider, name)) is not None}


def _digested(provider: ProviderConfig) -> dict[str, object]:
    """A provider's fields as the digest reads them: its `KIND_FIELDS`, `auth`, `headers` and a
    `bedrock` provider's key fields only when set, so a file without them digests as it did
    before they existed (no spurious re-apply on upgrade)."""
    fields = msgspec.structs.asdict(provider)
    for name in dict.fromkeys((*KIND_FIELDS, "auth", "headers", *BEDROCK_FIELDS)):
        if fields[name] is None:
            del fields[name]
    if fields["probe"] is msgspec.UNSET:  # no active probe: digested as before the field existed
        del fields["probe"]
    return fields


def file_digest(config: Config) -> str:
    """A digest of the file's `providers:` and `models:` (keys included, so a new key is a new file).

    Raises nothing; equal for equal catalogs whatever the key order.
    """
    providers = {name: _digested(p) for name, p in config.raw.providers.items()}
    body = doc_encoder.encode([providers, config.raw.models])
    return hashlib.sha256(b"turnout-catalog-file\0" + body).hexdigest()[:32]


def _print(kind: bytes, value: object) -> str:
    return hashlib.sha256(kind + b"\0" + doc_encoder.encode(value)).hexdigest()[:32]


def file_entries(config: Config) -> dict[str, str]:
    """Each catalog entry of the file (`models.<id>`, `providers.<name>`) -> a fingerprint of its
    value (keys included), to tell which entries the file changed (`turnout.catalog.ownership`)."""
    found = {f"providers.{name}": _print(b"file-provider", _digested(p)) for name, p in config.raw.providers.items()}
    found.update({f"models.{name}": _print(b"file-model", m) for name, m in config.raw.models.items()})
    return found


def stored_entries(doc: CatalogDoc) -> dict[str, str]:
    """Each entry of the stored catalog -> a fingerprint of it as stored (a sealed key's token
    included, so an admin edit of a key is an edit)."""
    found = {f"providers.{name}": _print(b"stored-provider", p) for name, p in doc.providers.items()}
    found.update({f"models.{name}": _print(b"stored-model", m) for name, m in doc.models.items()})
    return found


def same_entries(doc: CatalogDoc, config: Config) -> frozenset[str]:
    """The entries `doc` holds as the file declares them (`same_catalog`'s comparison, entry by entry)."""
    same = {f"models.{n}" for n, m in config.raw.models.items() if n in doc.models and _same_model(doc, n, m)}
    same.update(
        f"providers.{n}"
        for n, p in config.raw.providers.items()
        if n in doc.providers and _provider_view(p) == _provider_view(doc.providers[n])
    )
    return frozenset(same)


def _same_model(doc: CatalogDoc, name: str, model: object) -> bool:
    return doc_encoder.encode(doc.models[name]) == doc_encoder.encode(model)


def _provider_view(p: ProviderConfig | ProviderEntry) -> tuple[object, ...]:
    """What a comparison of a file's provider with a stored one looks at: kind, URL, `KIND_FIELDS`,
    whether a key is set, auth, the header names, the active probe."""
    if isinstance(p, ProviderConfig):
        has_key, probe = bool(p.api_key), _probe(p.probe)
    else:
        has_key, probe = p.key is not None, p.probe
    return (p.kind, p.base_url, kind_fields(p), has_key, p.auth, sorted(p.headers or ()), probe)


def doc_from_config(config: Config, vault: Vault) -> CatalogDoc:
    """The file's catalog as a document: each key sealed when the vault has a key, else a `file` reference."""
    providers: dict[str, ProviderEntry] = {}
    for name, p in config.raw.providers.items():
        key: KeyRef | None = None
        if p.api_key:
            try:
                key = KeyRef(source="sealed", sealed=vault.seal(p.api_key, platform_key_binding(name)))
            except VaultUnavailable:  # no TURNOUT_SECRET_KEY: each process keeps the key its file gives
                key = KeyRef(source="file")
        providers[name] = ProviderEntry(
            kind=p.kind,
            base_url=p.base_url,
            key=key,
            auth=p.auth,
            headers=None if p.headers is None else {h: _header_ref(vault, name, h, v) for h, v in p.headers.items()},
            probe=_probe(p.probe),
            **kind_fields(p),
        )
    return CatalogDoc(
        providers=providers, models=dict(config.raw.models), origin="file", file_digest=file_digest(config)
    )


def _header_ref(vault: Vault, provider: str, header: str, value: str) -> KeyRef:
    """A reference to a file's header value: sealed when the vault has a key, else `file`."""
    try:
        return KeyRef(
            source="sealed", sealed=vault.seal(value, header_binding(PLATFORM_ORG, provider, header, endpoint=False))
        )
    except VaultUnavailable:
        return KeyRef(source="file", name=header)


def resolve_headers(name: str, refs: dict[str, KeyRef] | None, file: Config, vault: Vault) -> dict[str, str] | None:
    """The clear extra headers of provider `name` for this process, or None when it has none.

    A value that does not open (or a `file` reference the process's file does not give) is
    logged (provider and header, never the value) and left out: the provider is called
    without it, and answers as it does to a request without that header.
    """
    if refs is None:
        return None
    own = file.raw.providers.get(name)
    out: dict[str, str] = {}
    for header, ref in refs.items():
        value: str | None = None
        if ref.source == "file":
            value = (own.headers or {}).get(header) if own is not None else None
        elif ref.sealed is not None:
            try:
                value = vault.open(ref.sealed, header_binding(PLATFORM_ORG, name, header, endpoint=False))
            except (VaultUnavailable, SecretUnreadable) as exc:
                log.error("catalog: provider %s: header %s cannot be opened (sent without it): %s", name, header, exc)
        if value:
            out[header] = value
    return out


def _probe(probe: ProbeConfig | msgspec.UnsetType) -> ProbeConfig | None:
    """A provider's active probe as the stored document holds it (None: none)."""
    return None if isinstance(probe, msgspec.UnsetType) else probe


def same_catalog(doc: CatalogDoc, config: Config) -> bool:
    """True when `doc` holds the file's models and providers (kinds, URLs, `KIND_FIELDS`, which keys are set)."""
    if doc_encoder.encode(doc.models) != doc_encoder.encode(config.raw.models):
        return False
    file_providers = {n: _provider_view(p) for n, p in config.raw.providers.items()}
    return file_providers == {n: _provider_view(p) for n, p in doc.providers.items()}


def resolve_key(name: str, ref: KeyRef | None, file: Config, env: Mapping[str, str], vault: Vault) -> str | None:
    """The clear key of provider `name` for this process, or None (its offers are skipped as NO_CREDENTIAL).

    A key that does not open is logged (its name, never the key) and treated as none, and so
    is an `env` reference to a variable no provider key may come from (`key_env_refusal`:
    `TURNOUT_SECRET_KEY`, ...), which a document stored before that rule may hold.
    """
    if ref is None:
        return None
    if ref.source == "env":
        reason = key_env_refusal(ref.name)
        if reason is not None:
            log.error("catalog: provider %s: api_key_env %s (offers skipped as no credential)", name, reason)
            return None
        return env.get(ref.name) or None
    if ref.source == "file":
        own = file.raw.providers.get(name)
        return own.api_key if own is not None and own.api_key else None
    if ref.sealed is None:
        return None
    try:
        return vault.open(ref.sealed, platform_key_binding(name))
    except (VaultUnavailable, SecretUnreadable) as exc:
        log.error("catalog: provider %s: its key cannot be opened (offers skipped as no credential): %s", name, exc)
        return None


def config_of(doc: CatalogDoc, file: Config, env: Mapping[str, str], vault: Vault, *, check: bool = True) -> Config:
    """The process's configuration with `doc` as its catalog, validated as a file is.

    Args:
        doc: the stored catalog.
        file: this process's configuration file (everything but the catalog,
            and the keys of `file` references).
        env: the environment (`env` references).
        vault: opens `sealed` references.
        check: validate (False: trust a document validated where it was written).

    Raises:
        ConfigError: the catalog breaks a rule of the file (the path named,
            e.g. `models.gpt.offers[0].provider: unknown provider 'x'`), or
            an `env` key reference names a variable no provider key may come
            from (`providers.p.api_key_env: must not name ...`).
    """
    if check:
        for name, p in doc.providers.items():
            if p.key is not None and p.key.source == "env":
                check_key_env(f"providers.{name}.api_key_env", p.key.name)
    providers = {
        name: ProviderConfig(
            kind=p.kind,
            base_url=p.base_url,
            api_key=resolve_key(name, p.key, file, env, vault),
            auth=p.auth,
            headers=resolve_headers(name, p.headers, file, vault),
            probe=msgspec.UNSET if p.probe is None else p.probe,
            **kind_fields(p),
        )
        for name, p in doc.providers.items()
    }
    return with_catalog(file, providers, doc.models, check=check)


def rotate_keys(doc: CatalogDoc, vault: Vault) -> tuple[CatalogDoc, int]:
    """`doc` with every sealed provider key re-sealed under the vault's newest key, and how many
    (README "Secrets and the SSRF guard": `turnout admin rotate-secrets`).

    Raises:
        VaultUnavailable / SecretUnreadable: a sealed key no configured key opens.
    """
    providers = {
        name: msgspec.structs.replace(
            p,
            key=KeyRef(source="sealed", sealed=vault.rotate(p.key.sealed, platform_key_binding(name)))
            if p.key is not None and p.key.sealed is not None
            else p.key,
            headers=None
            if p.headers is None
            else {
                h: KeyRef(
                    source="sealed",
                    sealed=vault.rotate(ref.sealed, header_binding(PLATFORM_ORG, name, h, endpoint=False)),
                )
                if ref.sealed is not None
                else ref
                for h, ref in p.headers.items()
            },
        )
        for name, p in doc.providers.items()
    }
    count = sum(p.key is not None and p.key.sealed is not None for p in doc.providers.values()) + sum(
        ref.sealed is not None for p in doc.providers.values() for ref in (p.headers or {}).values()
    )
    return (msgspec.structs.replace(doc, providers=providers), count) if count else (doc, 0)
