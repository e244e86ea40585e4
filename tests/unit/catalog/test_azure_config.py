"""An `azure_openai` provider in the configuration (README "Providers: Azure OpenAI"): its
`api_version` required, of Azure's form and refused on other kinds, kept through the stored
catalog and the admin CLI, and kept when a tenant's own key replaces the shared one."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec
import pytest

from turnout.catalog import Catalog
from turnout.catalog.doc import config_of, doc_from_config, file_digest, same_catalog
from turnout.config import ProviderConfig, parse_config, with_catalog
from turnout.core.credentials import Credential
from turnout.core.policy import Policy
from turnout.core.types import Target
from turnout.errors import ConfigError
from turnout.stored.catalog import KeyRef, doc_encoder
from turnout.tenancy.byok import resolve_call
from turnout.vault import Vault, generate_key
from turnout_cli.admin import _request
from turnout_cli.main import build_parser

AZURE = """
providers:
  azure: {kind: azure_openai, base_url: https://myres.openai.azure.com, api_key: ${AZURE_OPENAI_KEY}PROVIDER_EXTRA}
  openai: {kind: openai, base_url: https://api.openai.com/v1, api_key: sk-o}
models:
  gpt-4o: {offers: [{provider: azure, model: gpt4o-prod}, {provider: openai, model: gpt-4o}]}
  embed: {type: embedding, offers: [{provider: azure, model: te3-small}]}
"""
ENV = {"AZURE_OPENAI_KEY": "azure-key-0001"}


def _config(extra: str = ', api_version: "2024-10-21"', text: str = AZURE) -> Any:
    return parse_config(text.replace("PROVIDER_EXTRA", extra), env=ENV)


def test_an_azure_provider_takes_its_api_version_and_serves_chat_and_embeddings() -> None:
    config = _config()
    azure = config.raw.providers["azure"]
    assert (azure.kind, azure.api_version, azure.api_key) == ("azure_openai", "2024-10-21", "azure-key-0001")


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ("", "providers.azure.api_version: an `azure_openai` provider needs its API version"),
        (', api_version: ""', "providers.azure.api_version: an `azure_openai` provider needs its API version"),
        (", api_version: latest", "providers.azure.api_version: 'latest' is not an API version"),
        (', api_version: "2024-10-21&x=1"', "providers.azure.api_version: '2024-10-21&x=1' is not an API version"),
    ],
    ids=["missing", "empty", "word", "query-injection"],
)
def test_an_azure_provider_without_a_valid_api_version_is_refused_naming_it(extra: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace("?", r"\?")):
        _config(extra)


@pytest.mark.parametrize(
    "base_url",
    [
        "https://myres.openai.azure.com/openai",
        "https://myres.openai.azure.com/openai/",
        "https://myres.openai.azure.com/openai/v1",
        "https://myres.openai.azure.com/openai/deployments/gpt4o-prod",
    ],
    ids=["openai", "openai-slash", "openai-v1", "deployment"],
)
def test_an_azure_base_url_holding_the_openai_path_is_refused(base_url: str) -> None:
    text = AZURE.replace("https://myres.openai.azure.com", base_url)
    with pytest.raises(ConfigError, match=r"providers\.azure\.base_url: an `azure_openai` base_url is the resource's"):
        _config(text=text)


@pytest.mark.parametrize(
    "base_url", ["https://myres.openai.azure.com/", "https://gw.example/azure", "https://gw.example/openaiproxy"]
)
def test_an_azure_base_url_behind_a_path_is_accepted(base_url: str) -> None:
    text = AZURE.replace("https://myres.openai.azure.com", base_url)
    assert _config(text=text).raw.providers["azure"].base_url == base_url


def test_a_preview_api_version_is_accepted() -> None:
    assert _config(", api_version: 2025-01-01-preview").raw.providers["azure"].api_version == "2025-01-01-preview"


def test_an_api_version_on_another_kind_is_refused_naming_it() -> None:
    text = AZURE.replace("sk-o}", 'sk-o, api_version: "2024-10-21"}')
    with pytest.raises(ConfigError, match=r"providers\.openai\.api_version: only an `azure_openai` provider"):
        _config(text=text)


def test_the_stored_catalog_keeps_the_api_version_and_a_changed_one_is_a_new_catalog() -> None:
    config = _config()
    vault = Vault([generate_key()])
    doc = doc_from_config(config, vault)
    assert doc.providers["azure"].api_version == "2024-10-21"
    assert same_catalog(doc, config)
    assert not same_catalog(doc, _config(", api_version: 2025-01-01-preview"))
    back = config_of(doc, config, ENV, vault)
    assert back.raw.providers["azure"] == config.raw.providers["azure"]


def test_a_catalog_edit_without_the_api_version_is_refused() -> None:
    config = _config()
    providers = {**config.raw.providers, "azure": ProviderConfig(kind="azure_openai", base_url="https://x.example")}
    with pytest.raises(ConfigError, match=r"providers\.azure\.api_version"):
        with_catalog(config, providers, config.raw.models)


def test_a_tenants_own_azure_key_keeps_the_providers_kind_url_and_api_version() -> None:
    class Tenant:
        own_providers = frozenset({"azure"})

        def own_key(self, provider: str) -> str | None:
            return "tenant-azure-key" if provider == "azure" else None

        def endpoint(self, provider: str) -> ProviderConfig | None:
            return None

    target = Target(provider="azure", model="gpt4o-prod", catalog_model="gpt-4o")
    call = resolve_call(Catalog(_config()), Tenant(), target, key_mode="own_then_shared", policy=Policy())
    assert call is not None and call.credential is Credential.OWN
    assert call.provider == ProviderConfig(
        kind="azure_openai",
        base_url="https://myres.openai.azure.com",
        api_key="tenant-azure-key",
        api_version="2024-10-21",
    )


def test_the_admin_cli_sends_the_kind_and_api_version() -> None:
    argv = ["catalog", "set-provider", "az", "--kind", "azure_openai", "--base-url", "https://r.openai.azure.com"]
    args = build_parser().parse_args(["admin", "--key", "k", *argv, "--api-version", "2024-10-21"])
    assert _request(args) == (
        "PUT",
        "/catalog/providers/az",
        {"kind": "azure_openai", "base_url": "https://r.openai.azure.com", "api_version": "2024-10-21"},
    )


class _EntryBefore(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A stored provider as the version before `api_version` decodes it."""

    kind: str
    base_url: str
    key: KeyRef | None = None


def test_a_catalog_without_api_versions_is_stored_and_digested_as_before() -> None:
    config = parse_config(AZURE_FREE, env={})
    doc = doc_from_config(config, Vault([generate_key()]))
    stored = msgspec.json.decode(doc_encoder.encode(doc))
    assert all("api_version" not in p for p in stored["providers"].values())
    before = msgspec.json.Decoder(dict[str, _EntryBefore])
    assert set(before.decode(msgspec.json.encode(stored["providers"]))) == {"openai", "nokey"}
    old_providers = {
        n: {"kind": p.kind, "base_url": p.base_url, "api_key": p.api_key} for n, p in config.raw.providers.items()
    }
    old_body = doc_encoder.encode([old_providers, config.raw.models])
    assert file_digest(config) == hashlib.sha256(b"turnout-catalog-file\0" + old_body).hexdigest()[:32]


def test_an_api_version_changes_the_files_digest() -> None:
    assert file_digest(_config()) != file_digest(_config(", api_version: 2025-01-01-preview"))


AZURE_FREE = """
providers:
  openai: {kind: openai, base_url: https://api.openai.com/v1, api_key: sk-o}
  nokey: {kind: openai_compatible, base_url: https://n.example/v1}
models:
  m: {offers: [{provider: openai, model: m}, {provider: nokey, model: m}]}
"""
