"""The catalog document as stored in Redis (SPEC §11 `providers:` / `models:`).

Owns: the stored shape of the catalog — each model with its offers, each
provider with its base URL and a *reference* to its key (`KeyRef`), never
the key in clear — and its JSON encoder and decoder. Building it from a
file, resolving its key references and turning it back into a validated
`Config` is `turnout.catalog.doc`; reading and writing it
`turnout.state.catalog_store`.

Provider key references (`KeyRef.source`):
    `sealed`  the key sealed by the vault (`TURNOUT_SECRET_KEY`), bound to
              the provider (`turnout.catalog.doc.platform_key_binding`).
    `env`     the environment variable `name` of each process.
    `file`    the key the provider has in each process's own configuration file.
Must not import: services, FastAPI, arq, httpx, Redis, `turnout` packages but
`core`, `config` (the file's model and provider types) and the leaf
`turnout.vault` (the state edge stores this document).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from turnout.config import ModelConfig, ProviderKind
from turnout.config.providers import ProbeConfig
from turnout.core.upstream_auth import ProviderAuth
from turnout.vault import Sealed


class KeyRef(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where a provider's shared key comes from (module doc); never the key in clear."""

    source: Literal["sealed", "env", "file"]
    name: str = ""
    sealed: Sealed | None = None

    def view(self) -> dict[str, str]:
        """What an admin read shows: the source, the variable name, or the sealed key's last characters."""
        if self.source == "env":
            return {"source": "env", "name": self.name}
        if self.source == "sealed" and self.sealed is not None:
            return {"source": "sealed", "tail": f"…{self.sealed.tail}"}
        return {"source": self.source}


class ProviderEntry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """One provider of the stored catalog (`turnout.config.ProviderConfig` with a key reference).

    Fields left at their defaults are not stored (`omit_defaults`), so the catalog of a fleet
    with no `turnout.catalog.doc.KIND_FIELDS` anywhere (no Azure or Vertex AI provider) stays
    readable by a process of the version before it, which refuses unknown fields, during a
    rolling upgrade.
    """

    kind: ProviderKind
    base_url: str
    key: KeyRef | None = None
    api_version: str | None = None
    auth: ProviderAuth | None = None
    headers: dict[str, KeyRef] | None = None
    """Extra header name -> a reference to its value (`sealed`, bound to the provider and the
    header: `header_binding`; or `file`: the value the process's own file gives)."""
    region: str | None = None
    project: str | None = None
    location: str | None = None
    credentials_file: str | None = None
    probe: ProbeConfig | None = None
    """The provider's active probe (`turnout.config.ProviderConfig.probe`); None: none (not stored)."""


class CatalogDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The stored catalog.

    Attributes:
        providers: provider name -> its entry.
        models: catalog model id -> its offers and ordering (as in the file).
        origin: `file` (last written by a file apply) or `api` (by an admin edit).
        file_digest: digest of the file whose content was last applied.
    """

    providers: dict[str, ProviderEntry]
    models: dict[str, ModelConfig]
    origin: Literal["file", "api"] = "file"
    file_digest: str = ""

    def content(self) -> tuple[dict[str, ProviderEntry], dict[str, ModelConfig]]:
        """The catalog itself (what a comparison with a file looks at)."""
        return self.providers, self.models


class Owned(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A catalog entry the configuration file wrote (`turnout.catalog.ownership`): the fingerprints
    of the stored entry it wrote (`written`) and of the file's value it wrote it from (`source`;
    "" when not known: a catalog written before ownership was recorded)."""

    written: str
    source: str = ""


doc_encoder = msgspec.json.Encoder(order="sorted")
doc_decoder = msgspec.json.Decoder(CatalogDoc)
owned_decoder = msgspec.json.Decoder(dict[str, Owned])
