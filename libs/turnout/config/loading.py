"""A configuration file loaded: read, interpolated, typed and checked whole (SPEC §11).

Owns: the steps from a file's text to a validated `Config` and where each
step's errors go: a YAML error stops at once (nothing can be read past it);
the environment's errors (unset variables, stray `${`, references to
Turnout's own variables) are reported together; then the type errors and
the rules beyond the types are collected into one list, so a file with
three errors is refused with three lines, each naming its path. Also the
run-time catalog's entry (`with_catalog`) and the egress policy read off a
configuration. Nothing half-loads: a `Config` is returned whole or
`ConfigError` raised.
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from turnout.aws import config_rules as aws_rules
from turnout.config.checks import check_document
from turnout.config.documents import Config, RawConfig
from turnout.config.environment import interpolate, key_reference_errors
from turnout.config.findings import Findings
from turnout.config.providers import ModelConfig, ProviderConfig
from turnout.config.reading import read_document
from turnout.config.type_errors import collect
from turnout.core.policy import Policy, merge_policy
from turnout.errors import ConfigError
from turnout.rules.ssrf import AllowList

_REQUIRED_EMPTY: dict[str, Any] = {"providers": {}, "models": {}}
"""What a required section that did not convert holds while the other sections are checked."""


def _typed(data: dict[Any, Any], found: Findings) -> tuple[RawConfig, frozenset[str]]:
    """`data` as a `RawConfig`, its type errors added to `found`.

    Returns:
        (the document, each section that did not convert left at its default (a required one
        empty); those sections' names), so the rules of the other sections still run.
    """
    errors = collect(data, RawConfig)
    if not errors:
        return msgspec.convert(data, RawConfig), frozenset()
    found.errors += errors
    kept: dict[str, Any] = dict(_REQUIRED_EMPTY)
    broken: set[str] = set()
    for field in msgspec.structs.fields(RawConfig):
        name = field.encode_name
        if name in data and not collect(data[name], field.type, name):
            kept[name] = data[name]
        elif name in data or field.required:
            broken.add(name)
    return msgspec.convert(kept, RawConfig), frozenset(broken)


def parse_config(text: str, *, env: Mapping[str, str] | None = None, source: str = "<memory>") -> Config:
    """Parse and validate configuration text (YAML).

    Args:
        text: the YAML document.
        env: variables for `${NAME}` / `${NAME:-default}`; defaults to
            `os.environ`.
        source: a name for messages.

    Returns:
        A validated `Config`.

    Raises:
        ConfigError: the message names the offending path, e.g.
            `models.gpt-5.offers[1].provider: unknown provider 'azure-east'`;
            every error of the file is reported at once, one per line and
            listed in `errors` (module doc): type errors (unknown fields with
            a "did you mean", missing fields, wrong types and ranges, enum
            values with the allowed ones) first, then the rules beyond them.
    """
    env = os.environ if env is None else env
    data = read_document(text, source)
    found = Findings(key_reference_errors(data))
    data, missing = interpolate(data, env)
    found.errors += missing
    found.raise_any()
    raw, broken = _typed(data, found)
    if "providers" not in broken:
        raw = msgspec.structs.replace(raw, providers=_folded(found, raw.providers))
    policy = merge_policy(Policy(), raw.policy)
    config = Config(raw=raw, policy=policy, source=source)
    allow = None if "egress" in broken else _egress_allow(found, config, env)
    check_document(found, raw, policy, allow, broken)
    found.raise_any()
    return config


def egress_policy(config: Config, env: Mapping[str, str]) -> AllowList:
    """The egress policy for tenant endpoints: https on 443 / 8443, widened by the configuration's
    `egress:` section, with `TURNOUT_SSRF_ALLOW` and `egress.allow` admitted past the SSRF guard.

    Raises:
        ValueError: a malformed allow-list entry (the entry named).
    """
    egress = config.raw.egress
    return AllowList.from_env(env).widened(
        schemes=egress.schemes,
        ports=None if egress.ports == "any" else egress.ports,
        entries=egress.allow,
    )


def _egress_allow(found: Findings, config: Config, env: Mapping[str, str]) -> AllowList | None:
    """`egress_policy`, the policy the fleet checks the file's custom endpoints against when it merges
    its orgs, for the file's own check; None when it cannot be built, its errors added to `found`:
    an `egress.allow` entry that is neither a CIDR nor a host name (its index named), or a
    malformed `TURNOUT_SSRF_ALLOW`."""
    for i, entry in enumerate(config.raw.egress.allow):
        try:
            AllowList.parse(entry)
        except ValueError:
            found.add(f"egress.allow[{i}]: {entry!r} is neither a CIDR nor a host name")
            return None
    try:
        return egress_policy(config, env)
    except ValueError as exc:  # names TURNOUT_SSRF_ALLOW and its entry
        found.add(str(exc))
        return None


def load_config(path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None) -> Config:
    """Read and validate a configuration file (see `parse_config`).

    Raises:
        ConfigError: the file is missing, unreadable or invalid.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text (byte {exc.start}); a configuration is a YAML text file") from exc
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the configuration file: {exc.strerror}") from exc
    return parse_config(text, env=env, source=str(p))


def with_catalog(
    config: Config,
    providers: Mapping[str, ProviderConfig],
    models: Mapping[str, ModelConfig],
    *,
    check: bool = True,
) -> Config:
    """`config` with its catalog (`providers:` and `models:`) replaced, validated whole as a file is.

    The run-time catalog's entry point (`turnout.catalog.doc`): the same
    rules apply to an admin edit as to the file, cross-references included
    (a model a fallback or an org of the file names cannot be removed).
    `check=False` skips the validation (a catalog already validated where it
    was written, read by a process whose own file disagrees).

    Raises:
        ConfigError: every error, one per line, each naming its path, as `parse_config`.
    """
    found = Findings()
    raw = msgspec.structs.replace(config.raw, providers=_folded(found, providers), models=dict(models))
    if check:  # the types' own rules too (`msgspec.Meta` ranges), as decoding a file checks them
        providers_errors = collect(msgspec.to_builtins(raw.providers), dict[str, ProviderConfig], "providers")
        models_errors = collect(msgspec.to_builtins(raw.models), dict[str, ModelConfig], "models")
        found.errors += providers_errors + models_errors
        broken = frozenset(name for name, e in (("providers", providers_errors), ("models", models_errors)) if e)
        check_document(found, raw, config.policy, broken=broken)
    found.raise_any()
    return Config(raw=raw, policy=config.policy, source=config.source)


def _folded(found: Findings, providers: Mapping[str, ProviderConfig]) -> dict[str, ProviderConfig]:
    """`providers` with each `bedrock` provider's key fields folded into its `api_key`
    (`turnout.aws.config_rules.folded_key`; the fields then None); a key field without its pair
    is added to `found`, named by its path, and the provider's key fields dropped (so no later rule
    reports it again)."""
    out = dict(providers)
    for name, provider in providers.items():
        try:
            key = aws_rules.folded_key(f"providers.{name}", provider)
        except ConfigError as exc:
            found.errors += exc.errors
            out[name] = msgspec.structs.replace(
                provider, access_key_id=None, secret_access_key=None, session_token=None
            )
            continue
        if key is not None:
            out[name] = msgspec.structs.replace(
                provider, api_key=key, access_key_id=None, secret_access_key=None, session_token=None
            )
    return out
