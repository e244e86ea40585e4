"""What a catalog provider may read its key from and point at (the operator's file and admin API).

Owns: the two write-time rules of a provider that keep the operator's
catalog from reaching into the gateway itself (README "Catalog: models and
providers at run time"):

- its key's environment variable (`api_key_env` of the admin API, a
  `${NAME}` in the file's `api_key`) is a valid variable name and never one
  of Turnout's own, `TURNOUT_*` (case-insensitive): those hold the vault's
  master key (`TURNOUT_SECRET_KEY`, which opens every sealed key in Redis),
  the operator key, the Redis URL with its password, ... and a provider's
  key is sent, as a bearer token, to the provider's base URL;
- its base URL's host is no link-local address (169.254.0.0/16, fe80::/10)
  and no cloud metadata address or name (`turnout.rules.ssrf`'s lists:
  169.254.169.254, fd00:ec2::254, metadata.google.internal, ...), in any
  form the client would connect to (IPv4 in decimal / octal / hex / short
  form, IPv6 embedding one). Private and loopback hosts stay allowed: a
  self-hosted model or the local simulator is a legitimate provider.

Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

import ipaddress
import re

from yarl import URL

from turnout.errors import ConfigError
from turnout.rules.ssrf import (
    METADATA_ADDRESSES,
    METADATA_HOSTS,
    IPAddress,
    embedded_ipv4,
    parse_loose_ipv4,
    query_credential,
)
from turnout.rules.text import short_name

OWN_PREFIX = "TURNOUT_"
"""The prefix of Turnout's own environment variables (README "Secrets and the SSRF guard")."""

OWN_VARIABLE = (
    f"must not name one of Turnout's own variables ({OWN_PREFIX}*, such as TURNOUT_SECRET_KEY): "
    "a provider's key is sent to its base URL"
)
"""Why a provider's key may not come from one of Turnout's own variables (`is_own_variable`)."""

OWN_VARIABLE_SENT = (
    f"must not name one of Turnout's own variables ({OWN_PREFIX}*, such as TURNOUT_SECRET_KEY): "
    "what this field holds reaches a provider"
)
"""The same refusal for a `${...}` in a field of the file that is not a key (a base URL, a model name)."""

MAX_KEY_ENV_CHARS = 128
"""The longest variable name `api_key_env` may give."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def key_env_refusal(name: str) -> str | None:
    """Why `name` may not be the environment variable a provider's key is read from, or None.

    Args:
        name: the variable's name as written (`OPENAI_API_KEY`).

    Returns:
        The reason, in words that never quote `name` (so an over-long name is
        never echoed); None for an acceptable name. Refused: anything but
        letters, digits and `_` not starting with a digit (POSIX), more than
        `MAX_KEY_ENV_CHARS` characters, and names starting with `TURNOUT_`
        in any case (Turnout's own variables, module doc).
    """
    if len(name) > MAX_KEY_ENV_CHARS or not _ENV_NAME.fullmatch(name):
        return (
            "must be an environment variable name (letters, digits and `_`, not starting with a digit; "
            f"at most {MAX_KEY_ENV_CHARS} characters)"
        )
    return OWN_VARIABLE if is_own_variable(name) else None


def is_own_variable(name: str) -> bool:
    """True when `name` is one of Turnout's own environment variables: it starts with `TURNOUT_`, in any case."""
    return name.upper().startswith(OWN_PREFIX)


def check_key_env(path: str, name: str) -> None:
    """Refuse `name` as the variable of a provider's key (`key_env_refusal`).

    Raises:
        ConfigError: `"<path>: <why>"`, e.g. `providers.p.api_key_env: must
            not name one of Turnout's own variables (...)`.
    """
    reason = key_env_refusal(name)
    if reason is not None:
        raise ConfigError(f"{path}: {reason}")


def check_base_url(path: str, url: str) -> None:
    """Refuse a provider base URL whose query carries a credential (`?key=…`, as tenant endpoints'),
    or whose host is link-local or a cloud metadata address or name.

    Checks the URL as written: its host as the upstream client parses it
    (yarl), IP literals in every encoding the resolver reads
    (`turnout.rules.ssrf.parse_loose_ipv4`) and IPv6 forms embedding an
    IPv4 address (`turnout.rules.ssrf.embedded_ipv4`). A host *name* that
    resolves to a metadata address when a request is sent is not caught:
    catalog providers share the plain upstream client, which has no
    checking resolver (the SSRF-guarded client of tenant custom endpoints,
    `turnout.adapters.guarded`, has one), and one on that client would sit
    on the request path; that is out of this write-time check's scope.

    Args:
        path: the field, for the message (`providers.p.base_url`).
        url: the base URL, already an http(s) URL without userinfo (`turnout.config`).

    Raises:
        ConfigError: `"<path>: <why>; ..."`, e.g. `providers.p.base_url:
            169.254.169.254 is a cloud metadata address; ...`.
    """
    try:
        parsed = URL(url)
        host = parsed.raw_host or ""
    except ValueError as exc:
        raise ConfigError(f"{path}: the base URL does not parse: {exc}") from None
    param = query_credential(parsed.raw_query_string)
    if param is not None:  # the tenant endpoints' rule (`turnout.rules.ssrf.check_base_url`)
        raise ConfigError(
            f"{path}: the base URL's query carries a credential (`{param}`); put it in the provider's "
            "`api_key` (or its `auth`), which is kept out of logs and answers, not in the URL"
        )
    reason = _host_refusal(host)
    if reason is not None:
        raise ConfigError(f"{path}: {reason}; a provider may not point at a link-local or cloud metadata address")


def _host_refusal(host: str) -> str | None:
    """Why a base URL's host (as parsed, lowercase) is refused, or None."""
    name = host.lower().rstrip(".")
    literal, zone, _ = name.strip("[]").partition("%")
    ip = _address(literal)
    if zone and not isinstance(ip, ipaddress.IPv6Address):
        return f"host {short_name(host)} carries percent-encoding"
    if ip is None:
        return f"{name} is a cloud metadata service name" if name in METADATA_HOSTS else None
    candidates: list[tuple[IPAddress, str]] = [(ip, "")]
    embedded = embedded_ipv4(ip) if isinstance(ip, ipaddress.IPv6Address) else None
    if embedded is not None:
        candidates.append((embedded[1], f"{embedded[0]} of "))
    for candidate, form in candidates:
        if candidate in METADATA_ADDRESSES:
            return f"{ip} is {form}a cloud metadata address"
        if candidate.is_link_local:
            return f"{ip} is {form}a link-local address"
    return None


def _address(host: str) -> IPAddress | None:
    """The address `host` names when it is an IP literal in any form the resolver reads, else None."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return parse_loose_ipv4(host)
