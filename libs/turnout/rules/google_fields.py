"""The fields of the Google provider kinds (`gemini`, `vertex`), checked with their paths.

Owns: `check_google_fields`, the write-time rules of a provider's `project`, `location` and
`credentials_file` (required for `vertex`, refused on every other kind) and of a Google
provider's `base_url` (its API root: the family adds `/v1beta/models/...` or
`/v1/projects/...` itself), and `check_credentials_file`, which `turnout config check` runs to
name an unreadable or invalid service-account file (README "Providers: Gemini and Vertex AI"),
and `unusable_key_files`, which a worker logs at start and at each catalog change.
Must not import: services, FastAPI, arq, httpx.

Sources: https://cloud.google.com/resource-manager/docs/creating-managing-projects (project
ids), https://cloud.google.com/vertex-ai/docs/general/locations (locations such as
`us-central1`, `europe-west4`, `global`),
https://cloud.google.com/iam/docs/keys-create-delete (the service-account key file).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from turnout.errors import ConfigError

GOOGLE_FIELDS: Final = ("project", "location", "credentials_file")
"""The fields only a `vertex` provider takes (all three required there)."""
PROJECT: Final = re.compile(r"(?:[a-z0-9.-]+:)?[a-z][a-z0-9-]{4,28}[a-z0-9]|[0-9]{1,20}")
"""A Google Cloud project id (`my-proj`, `example.com:my-proj`) or project number."""
LOCATION: Final = re.compile(r"[a-z]+(?:-[a-z]+[0-9]*)*")
"""A Vertex AI location (`us-central1`, `europe-west4`, `global`)."""
REGIONAL_HOST: Final = "-aiplatform.googleapis.com"
"""A Vertex AI regional endpoint's host is `{location}` followed by this (its location must be the provider's)."""
_VERSIONED: Final = re.compile(r"/v1(?:beta[0-9]*)?(?:/|$)")


def _path_of(url: str) -> str:
    return url.split("?", 1)[0].split("#", 1)[0].split("://", 1)[-1].partition("/")[2]


def check_google_fields(
    path: str,
    kind: str,
    base_url: str,
    *,
    project: str | None,
    location: str | None,
    credentials_file: str | None,
) -> None:
    """The rules of one provider's Google fields (module doc).

    Args:
        path: the provider's path (`providers.vertex`).
        kind: its kind.
        base_url: its API root.
        project, location, credentials_file: the fields as given (None: absent).

    Raises:
        ConfigError: the message names `{path}.<field>` (or `{path}.base_url`).
    """
    given = {"project": project, "location": location, "credentials_file": credentials_file}
    if kind != "vertex":
        for name, value in given.items():
            if value is not None:
                raise ConfigError(f"{path}.{name}: only a `vertex` provider takes a {name}, this one is `{kind}`")
        if kind == "gemini" and _VERSIONED.search("/" + _path_of(base_url)):
            raise ConfigError(
                f"{path}.base_url: a `gemini` base_url is the API's root without /v1beta "
                "(https://generativelanguage.googleapis.com): the family adds /v1beta/models/..."
            )
        return
    for name, value in given.items():
        if not value:
            raise ConfigError(
                f'{path}.{name}: a `vertex` provider needs its {name} (README "Providers: Gemini and Vertex AI")'
            )
    assert project is not None and location is not None
    if not PROJECT.fullmatch(project):
        raise ConfigError(f"{path}.project: {project!r} is not a Google Cloud project id such as my-proj")
    if not LOCATION.fullmatch(location):
        raise ConfigError(f"{path}.location: {location!r} is not a Vertex AI location such as us-central1")
    host = urlsplit(base_url).hostname or ""
    if host.endswith(REGIONAL_HOST) and host.removesuffix(REGIONAL_HOST) != location:
        raise ConfigError(  # Vertex AI answers a location other than its endpoint's with a 400
            f"{path}.location: {location!r} is not the location of base_url ({host.removesuffix(REGIONAL_HOST)})"
        )
    assert credentials_file is not None
    if not credentials_file.startswith("/") or any(ord(c) < 0x20 for c in credentials_file):
        raise ConfigError(  # each process reads it from its own disk: a relative path depends on where it started
            f"{path}.credentials_file: an absolute path without control characters (/secrets/vertex-sa.json)"
        )
    if _VERSIONED.search("/" + _path_of(base_url)) or "/projects/" in base_url:
        raise ConfigError(
            f"{path}.base_url: a `vertex` base_url is the regional endpoint without a path "
            "(https://us-central1-aiplatform.googleapis.com): the family adds /v1/projects/..."
        )


REQUIRED_KEYS: Final = ("type", "client_email", "private_key", "token_uri")
"""The fields of a service-account key file the token exchange needs."""


def check_credentials_file(path: str, credentials_file: str) -> None:
    """That `credentials_file` is a readable service-account key file (I/O: reads the file).

    Checks it parses as JSON, says `"type": "service_account"` and holds every `REQUIRED_KEYS`
    field; the key itself is not parsed and never echoed.

    Raises:
        ConfigError: `{path}: <the file's path>: <why>` (unreadable: the OS error's class).
    """
    try:
        with open(credentials_file, encoding="utf-8") as f:
            info = json.load(f)
    except OSError as exc:
        raise ConfigError(f"{path}: {credentials_file}: cannot be read ({type(exc).__name__})") from None
    except ValueError:
        raise ConfigError(f"{path}: {credentials_file}: is not JSON (a service-account key file)") from None
    if not isinstance(info, dict) or info.get("type") != "service_account":
        raise ConfigError(f'{path}: {credentials_file}: is not a service-account key file ("type": "service_account")')
    missing = [k for k in REQUIRED_KEYS if not isinstance(info.get(k), str) or not info.get(k)]
    if missing:
        raise ConfigError(f"{path}: {credentials_file}: the service-account key file lacks {', '.join(missing)}")


def unusable_key_files(providers: Mapping[str, Any]) -> list[str]:
    """Why each `vertex` provider's service-account file cannot be used on this host, one
    `check_credentials_file` message per such provider (`providers.<name>.credentials_file: ...`),
    in name order; [] when every one can (I/O: reads the files).

    Args:
        providers: provider name -> its configuration (`kind`, `credentials_file`): a
            `ProviderConfig`, or the file's plain mapping (so a file with other errors still has
            its key files checked); a name or value of another type is passed over.
    """
    found: list[str] = []
    for name in sorted(n for n in providers if isinstance(n, str)):
        provider = providers[name]
        kind, credentials_file = _field(provider, "kind"), _field(provider, "credentials_file")
        if kind == "vertex" and isinstance(credentials_file, str) and credentials_file:
            try:
                check_credentials_file(f"providers.{name}.credentials_file", credentials_file)
            except ConfigError as exc:
                found.append(str(exc))
    return found


def _field(provider: Any, name: str) -> Any:
    """A provider's field, from a `ProviderConfig` or from the file's plain mapping."""
    return provider.get(name) if isinstance(provider, Mapping) else getattr(provider, name, None)
