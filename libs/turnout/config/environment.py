"""`${NAME}` references of a configuration file replaced from the environment (SPEC §11).

Owns: `${NAME}` / `${NAME:-default}` interpolation of a read document, naming
every unset variable and every `${` that starts no reference at once, and the
refusal of a reference to one of Turnout's own variables in a string sent
upstream (`turnout.rules.provider_rules`: `${TURNOUT_SECRET_KEY}` as a key
would send the vault's key to a provider).
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from turnout.rules import provider_rules

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def interpolate(data: Any, env: Mapping[str, str]) -> tuple[Any, list[str]]:
    """`data` with `${NAME}` / `${NAME:-default}` replaced from `env`, and its errors.

    Returns:
        (the data, an unset variable replaced by ""; every unset variable without a default
        and every `${` that starts no reference (a missing `}`, a name with a space), one
        `path: message` line each, in document order).
    """
    missing: list[str] = []
    return _replace(data, env, "", missing), missing


def _replace(node: Any, env: Mapping[str, str], path: str, missing: list[str]) -> Any:
    """`node` with its references replaced (`interpolate`), its errors appended to `missing`."""
    if isinstance(node, dict):
        out: Any = {k: _replace(v, env, f"{path}.{k}" if path else str(k), missing) for k, v in node.items()}
    elif isinstance(node, list):
        out = [_replace(v, env, f"{path}[{i}]", missing) for i, v in enumerate(node)]
    elif isinstance(node, str) and "${" in node:

        def sub(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            missing.append(f"{path}: environment variable {name} is not set (write ${{{name}:-}} to allow empty)")
            return ""

        out = _ENV.sub(sub, node)
        stray = _ENV.sub(lambda m: " " * len(m.group(0)), node).find("${")  # a reference's own `${` is blanked
        if stray >= 0:  # a typo (`${KEY`, `${A B}`) would be sent as is; the value is not shown (it may be a key)
            missing.append(
                f"{path}: `${{` at character {stray + 1} does not start a variable reference: write ${{NAME}} or "
                "${NAME:-default} (NAME: letters, digits and _, not starting with a digit)"
            )
    else:
        out = node
    return out


def _sent_strings(data: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """Each string of the file that Turnout sends to an upstream or keeps in the catalog, with its
    path, as written: every string of `providers:` and `models:` (keys, base URLs, model names:
    a URL or a model name reaches the provider, and the catalog in Redis shows them in clear),
    `orgs.*.provider_keys.*`, `orgs.*.custom_endpoints.*.api_key`."""
    for section in ("providers", "models"):
        yield from _strings(data.get(section), section)
    orgs = data.get("orgs")
    for org_name, org in orgs.items() if isinstance(orgs, dict) else ():
        if not isinstance(org, dict):
            continue
        byok = org.get("provider_keys")
        for provider_name, secret in byok.items() if isinstance(byok, dict) else ():
            yield f"orgs.{org_name}.provider_keys.{provider_name}", secret
        endpoints = org.get("custom_endpoints")
        for endpoint_name, endpoint in endpoints.items() if isinstance(endpoints, dict) else ():
            if isinstance(endpoint, dict):
                yield f"orgs.{org_name}.custom_endpoints.{endpoint_name}.api_key", endpoint.get("api_key")
                yield from _strings(
                    endpoint.get("headers"), f"orgs.{org_name}.custom_endpoints.{endpoint_name}.headers"
                )


def _strings(node: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Every string under `node`, with its dotted path (`models.m.offers[0].model`)."""
    if isinstance(node, str):
        yield path, node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _strings(value, f"{path}[{i}]")


_AWS_SECRET_FIELDS: Final = (".access_key_id", ".secret_access_key", ".session_token")
"""A `bedrock` provider's key fields (`_is_key`)."""


def _is_key(path: str) -> bool:
    """Whether the field at `path` (from `_sent_strings`) is a key, not a URL or a model name."""
    return path.endswith((".api_key", *_AWS_SECRET_FIELDS)) or not path.startswith(("providers.", "models."))


def key_reference_errors(data: Mapping[str, Any]) -> list[str]:
    """A `${NAME}` of one of Turnout's own variables in any string sent upstream (`_sent_strings`:
    keys, base URLs, model names), looked for before interpolation (`turnout.rules.provider_rules`:
    `${TURNOUT_SECRET_KEY}` would send the vault's key to a provider).

    Returns:
        One `path: message` line per reference, naming the field and the variable; [] when none.
    """
    return [
        f"{path}: `${{{m.group(1)}}}` "
        + (provider_rules.OWN_VARIABLE if _is_key(path) else provider_rules.OWN_VARIABLE_SENT)
        for path, value in _sent_strings(data)
        if isinstance(value, str)
        for m in _ENV.finditer(value)
        if provider_rules.is_own_variable(m.group(1))
    ]
