"""An OpenAI-compatible provider's `auth` and `headers` (README "Providers: any OpenAI-compatible
endpoint"): validated with their path, only on `openai_compatible`; kept by the stored catalog
(header values sealed, bound to the provider and the header, or a `file` reference) and by a
tenant's custom endpoint (sealed, opened for its calls, masked in reads, re-sealed by rotation);
sent by the adapter; never let out by the scrubber; a file without them digests as before."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
import pytest

from turnout.adapters.base import CallSpec
from turnout.adapters.openai_chat import OpenAIChat
from turnout.catalog.doc import config_of, doc_from_config, file_digest, rotate_keys, same_catalog
from turnout.config import parse_config
from turnout.core.types import Target
from turnout.core.upstream_auth import ProviderAuth
from turnout.errors import ConfigError
from turnout.stored.catalog import doc_encoder
from turnout.stored.orgs import OrgDoc
from turnout.tenancy.admin import put_endpoint, rotate_secrets
from turnout.tenancy.directory import OrgCredentials, static_secrets
from turnout.tenancy.views import endpoint_view
from turnout.vault import SecretUnreadable, Vault, VaultUnavailable, generate_key, header_binding
from turnout_cli.admin import _request
from turnout_cli.main import build_parser

FILE = """
providers:
  vllm: {kind: openai_compatible, base_url: https://vllm.example/v1, api_key: vk-0001EXTRA}
  openai: {kind: openai, base_url: https://api.openai.com/v1, api_key: sk-o}
models:
  llama: {offers: [{provider: vllm, model: llama-3}]}
"""
AUTH = ", auth: {header: api-key, scheme: ''}, headers: {X-Team: ${TEAM}}"
ENV = {"TEAM": "team-secret-0001"}


def _config(extra: str = AUTH, text: str = FILE) -> Any:
    return parse_config(text.replace("EXTRA", extra), env=ENV)


def test_an_openai_compatible_provider_takes_its_auth_and_interpolated_headers() -> None:
    vllm = _config().raw.providers["vllm"]
    assert vllm.auth == ProviderAuth(header="api-key", scheme="")
    assert vllm.headers == {"X-Team": "team-secret-0001"}
    assert vllm.secrets() == ["vk-0001", "team-secret-0001"]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (FILE.replace("sk-o}", "sk-o, headers: {X-A: b}}"), r"providers\.openai\.headers: only an openai_compatible"),
        (FILE.replace("sk-o}", "sk-o, auth: {header: x}}"), r"providers\.openai\.auth: only an openai_compatible"),
        (
            FILE.replace("EXTRA", ", headers: {Host: x}"),
            r"providers\.vllm\.headers\.Host: Host is set by the HTTP client or the gateway",
        ),
        (FILE.replace("EXTRA", ", auth: {header: 'a b'}"), r"providers\.vllm\.auth\.header: 'a b' is not a header"),
        (FILE.replace("EXTRA", ", auth: {header: k, realm: x}"), r"providers\.vllm\.auth"),
    ],
    ids=["headers-on-openai", "auth-on-openai", "reserved", "bad-name", "unknown-field"],
)
def test_a_provider_auth_or_header_that_cannot_be_sent_is_refused_naming_it(text: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        _config(text=text)


def test_the_adapter_sends_the_key_in_the_providers_header_with_its_extra_headers() -> None:
    vllm = _config().raw.providers["vllm"]
    spec = CallSpec(
        target=Target(provider="vllm", model="llama-3", catalog_model="llama"),
        base_url=vllm.base_url,
        api_key="vk-0001",
        body=b"{}",
        timeout_s=5.0,
        request_id="r1",
        kind="openai_compatible",
        auth=vllm.auth,
        headers=vllm.headers,
    )
    request = OpenAIChat().build_request(httpx.AsyncClient(), spec, stream=False)
    assert request.headers["api-key"] == "vk-0001"
    assert request.headers["x-team"] == "team-secret-0001"
    assert "authorization" not in request.headers


def test_the_stored_catalog_seals_each_header_value_to_its_provider_and_header() -> None:
    config, vault = _config(), Vault([generate_key()])
    doc = doc_from_config(config, vault)
    ref = (doc.providers["vllm"].headers or {})["X-Team"]
    assert ref.source == "sealed" and ref.sealed is not None
    assert b"team-secret-0001" not in doc_encoder.encode(doc)
    assert vault.open(ref.sealed, header_binding("", "vllm", "x-team", endpoint=False)) == "team-secret-0001"
    with pytest.raises(SecretUnreadable):  # bound: it does not open as another provider's header
        vault.open(ref.sealed, header_binding("", "openai", "x-team", endpoint=False))
    assert same_catalog(doc, config)
    assert config_of(doc, config, ENV, vault).raw.providers["vllm"] == config.raw.providers["vllm"]
    rotated, count = rotate_keys(doc, vault)
    assert count == 3  # two keys and one header
    assert config_of(rotated, config, ENV, vault).raw.providers["vllm"].headers == {"X-Team": "team-secret-0001"}


def test_without_a_vault_key_the_header_is_a_file_reference_read_from_each_process_file() -> None:
    config = _config()
    doc = doc_from_config(config, Vault([]))
    assert (doc.providers["vllm"].headers or {})["X-Team"].source == "file"
    assert config_of(doc, config, ENV, Vault([])).raw.providers["vllm"].headers == {"X-Team": "team-secret-0001"}


def test_a_changed_header_set_is_a_new_catalog_and_a_file_without_them_digests_as_before() -> None:
    doc = doc_from_config(_config(), Vault([generate_key()]))
    assert not same_catalog(doc, _config(", headers: {X-Other: a}"))
    plain = _config("")
    stored = doc_encoder.encode(doc_from_config(plain, Vault([])).providers["vllm"])
    assert b"auth" not in stored and b"headers" not in stored  # a process of the version before reads it
    fields = msgspec.structs.asdict(plain.raw.providers["vllm"])
    assert fields["auth"] is None and file_digest(plain) == file_digest(_config(""))


def test_header_values_are_known_to_the_scrubber_from_the_start() -> None:
    text = FILE.replace("EXTRA", AUTH) + (
        "orgs:\n  acme:\n    custom_endpoints:\n"
        "      mine: {base_url: https://mine.example/v1, headers: {X-Project: proj-secret-0042}}\n"
    )
    found = static_secrets(_config(text=text), {})
    assert {"team-secret-0001", "proj-secret-0042"} <= set(found)


def _vault() -> Vault:
    return Vault([generate_key()])


def test_a_custom_endpoints_headers_are_sealed_opened_for_its_calls_masked_and_rotated() -> None:
    vault = _vault()
    sealed = {"X-Project": vault.seal("proj-secret-0042", header_binding("acme", "mine", "X-Project", endpoint=True))}
    auth = ProviderAuth(header="api-key", scheme="")
    doc = put_endpoint(OrgDoc(id="acme"), "mine", "https://mine.example/v1", None, 1.0, auth=auth, headers=sealed)
    view = endpoint_view("mine", doc.custom_endpoints["mine"])
    assert view["auth"] == {"header": "api-key", "scheme": ""} and view["headers"] == {"X-Project": "…0042"}
    provider = OrgCredentials(doc, vault).endpoint("custom:acme:mine")
    assert provider is not None and provider.auth == auth and provider.headers == {"X-Project": "proj-secret-0042"}
    rotated, count = rotate_secrets(doc, vault)
    assert count == 1
    assert (OrgCredentials(rotated, vault).endpoint("custom:acme:mine") or provider).headers == provider.headers
    moved = msgspec.structs.replace(doc, id="beta")  # a sealed header moved to another org does not open
    assert OrgCredentials(moved, vault).endpoint("custom:beta:mine") is None


def test_an_endpoint_stored_without_auth_or_headers_encodes_as_before() -> None:
    doc = put_endpoint(OrgDoc(id="acme"), "open", "https://open.example/v1", None, 1.0)
    raw = msgspec.json.encode(doc.custom_endpoints["open"])
    assert b"auth" not in raw and b"headers" not in raw and b"secret" not in raw


def test_the_admin_cli_sends_the_auth_header_and_scheme() -> None:
    argv = ["catalog", "set-provider", "v", "--kind", "openai_compatible", "--base-url", "https://v.example/v1"]
    args = build_parser().parse_args(["admin", "--key", "k", *argv, "--auth-header", "api-key"])
    assert _request(args)[2]["auth"] == {"header": "api-key", "scheme": "Bearer"}  # the file's default
    alone = build_parser().parse_args(["admin", "--key", "k", *argv, "--auth-header", "api-key", "--auth-scheme", ""])
    assert _request(alone)[2]["auth"] == {"header": "api-key", "scheme": ""}


def test_a_vault_without_keys_cannot_seal() -> None:
    with pytest.raises(VaultUnavailable):
        Vault([]).seal("x", header_binding("", "p", "h", endpoint=False))
