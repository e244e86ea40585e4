"""A `bedrock` provider in the configuration (README "Providers: Amazon Bedrock"): `region` required
and refused on other kinds, its keys both or neither (folded into one sealed key), each refusal
naming its path; kept through the stored catalog, the admin CLI and a tenant's own keys."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from turnout.aws.keys import join_key
from turnout.catalog import Catalog
from turnout.catalog.doc import config_of, doc_from_config, file_digest, same_catalog
from turnout.config import ProviderConfig, has_shared_credential, parse_config, with_catalog
from turnout.core.credentials import Credential
from turnout.core.policy import Policy
from turnout.core.types import Target
from turnout.errors import ConfigError
from turnout.stored.catalog import doc_encoder
from turnout.tenancy.byok import resolve_call
from turnout.vault import Vault, generate_key
from turnout_cli.admin import _request
from turnout_cli.main import build_parser

BEDROCK = """
providers:
  bedrock: {kind: bedrock, base_url: https://bedrock-runtime.us-east-1.amazonaws.com, region: us-east-1PROVIDER_EXTRA}
  anthropic: {kind: anthropic, base_url: https://api.anthropic.com, api_key: sk-ant}
models:
  claude: {offers: [{provider: bedrock, model: "anthropic.claude-3-5-sonnet-20240620-v1:0"}, {provider: anthropic, model: claude-3-5-sonnet}]}
"""
KEYS = ", access_key_id: ${AWS_ACCESS_KEY_ID}, secret_access_key: ${AWS_SECRET_ACCESS_KEY}"
ENV = {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE000000001", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}


def _config(extra: str = KEYS, text: str = BEDROCK, env: dict[str, str] | None = None) -> Any:
    return parse_config(text.replace("PROVIDER_EXTRA", extra), env=ENV if env is None else env)


def test_the_keys_are_expanded_and_folded_into_one_key() -> None:
    provider = _config().raw.providers["bedrock"]
    assert (provider.kind, provider.region) == ("bedrock", "us-east-1")
    assert provider.api_key == join_key(ENV["AWS_ACCESS_KEY_ID"], ENV["AWS_SECRET_ACCESS_KEY"])
    assert (provider.access_key_id, provider.secret_access_key, provider.session_token) == (None, None, None)


def test_a_session_token_joins_the_key() -> None:
    provider = _config(KEYS + ", session_token: FwoGZXIvYXdzE+token=").raw.providers["bedrock"]
    assert provider.api_key == join_key(ENV["AWS_ACCESS_KEY_ID"], ENV["AWS_SECRET_ACCESS_KEY"], "FwoGZXIvYXdzE+token=")


def test_without_keys_the_provider_uses_the_credential_chain() -> None:
    provider = _config("").raw.providers["bedrock"]
    assert provider.api_key is None and has_shared_credential(provider)
    assert "bedrock" in Catalog(_config("")).keyed_providers
    assert not has_shared_credential(ProviderConfig(kind="openai", base_url="https://x.example"))


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (
            ", access_key_id: AKIAEXAMPLE000000001",
            r"providers\.bedrock\.access_key_id: given without secret_access_key",
        ),
        (", secret_access_key: s3cret", r"providers\.bedrock\.secret_access_key: given without access_key_id"),
        (
            ", session_token: tok",
            r"providers\.bedrock\.session_token: given without access_key_id and secret_access_key",
        ),
        (KEYS + ", api_key: a:b", r"providers\.bedrock\.api_key: a bedrock provider gives access_key_id"),
        (
            ", access_key_id: short, secret_access_key: s",
            r"providers\.bedrock\.access_key_id: not an AWS access key id",
        ),
        (", access_key_id: AKIAEXAMPLE000000001, secret_access_key: 'a:b'", r"providers\.bedrock\.secret_access_key"),
        (", api_key: just-a-key", r"providers\.bedrock\.api_key: a bedrock provider's key is ACCESS_KEY_ID"),
    ],
    ids=["id-alone", "secret-alone", "token-alone", "both-forms", "bad-id", "colon", "bad-key"],
)
def test_bad_keys_are_refused_naming_the_field(extra: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        _config(extra)


@pytest.mark.parametrize(
    ("region", "words"),
    [(None, "needs its AWS region"), ("", "needs its AWS region"), ("US East", "is not an AWS region")],
    ids=["missing", "empty", "words"],
)
def test_a_bedrock_provider_needs_a_region(region: str | None, words: str) -> None:
    text = BEDROCK.replace(", region: us-east-1", "" if region is None else f", region: '{region}'")
    with pytest.raises(ConfigError, match=rf"providers\.bedrock\.region: .*{words}"):
        _config(text=text)


@pytest.mark.parametrize("field", ["region: us-east-1", "access_key_id: AKIAEXAMPLE000000001", "session_token: t"])
def test_the_bedrock_fields_are_refused_on_other_kinds(field: str) -> None:
    text = BEDROCK.replace("api_key: sk-ant}", f"api_key: sk-ant, {field}}}")
    name = field.split(":")[0]
    with pytest.raises(ConfigError, match=rf"providers\.anthropic\.{name}: only a `bedrock` provider takes a {name}"):
        _config(text=text)


def test_a_region_other_than_the_endpoints_is_refused_and_a_vpc_endpoint_takes_any() -> None:
    text = BEDROCK.replace("region: us-east-1PROVIDER", "region: us-west-2PROVIDER")
    with pytest.raises(
        ConfigError, match=r"providers\.bedrock\.region: 'us-west-2' is not the region of base_url \(us-east-1\)"
    ):
        _config(text=text)
    vpc = text.replace(
        "https://bedrock-runtime.us-east-1.amazonaws.com", "https://vpce-1.bedrock-runtime.example.internal"
    )
    _config(text=vpc)  # a private name says no region: any is taken
    aws_vpc = text.replace(
        "https://bedrock-runtime.us-east-1.amazonaws.com",
        "https://vpce-0abc-xyz.bedrock-runtime.us-east-1.vpce.amazonaws.com",
    )
    with pytest.raises(ConfigError, match=r"'us-west-2' is not the region of base_url \(us-east-1\)"):
        _config(text=aws_vpc)  # an interface endpoint's AWS name says its region


def test_a_base_url_holding_the_model_path_is_refused() -> None:
    text = BEDROCK.replace("amazonaws.com,", "amazonaws.com/model/x,")
    with pytest.raises(
        ConfigError, match=r"providers\.bedrock\.base_url: a `bedrock` base_url is the runtime endpoint"
    ):
        _config(text=text)


def test_a_turnout_variable_as_a_key_field_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"providers\.bedrock\.secret_access_key: `\$\{TURNOUT_SECRET_KEY\}`"):
        _config(", access_key_id: AKIAEXAMPLE000000001, secret_access_key: ${TURNOUT_SECRET_KEY}")


def test_the_stored_catalog_seals_the_key_and_keeps_the_region() -> None:
    config = _config()
    vault = Vault([generate_key()])
    doc = doc_from_config(config, vault)
    stored = doc_encoder.encode(doc)
    assert ENV["AWS_SECRET_ACCESS_KEY"].encode() not in stored and b'"region":"us-east-1"' in stored
    assert same_catalog(doc, config) and not same_catalog(doc, _config(text=BEDROCK.replace("us-east-1", "eu-west-1")))
    assert config_of(doc, config, ENV, vault).raw.providers["bedrock"] == config.raw.providers["bedrock"]


def test_a_region_changes_the_digest_and_a_fleet_without_bedrock_stores_no_region() -> None:
    assert file_digest(_config()) != file_digest(_config(text=BEDROCK.replace("us-east-1", "eu-west-1")))
    other = parse_config(
        "providers: {o: {kind: openai, base_url: https://api.openai.com/v1}}\nmodels: {m: {offers: [{provider: o, model: m}]}}",
        env={},
    )
    stored = msgspec.json.decode(doc_encoder.encode(doc_from_config(other, Vault([generate_key()]))))
    assert stored["providers"]["o"] == {"kind": "openai", "base_url": "https://api.openai.com/v1"}


def test_a_catalog_edit_without_a_region_is_refused() -> None:
    config = _config()
    providers = {**config.raw.providers, "bedrock": ProviderConfig(kind="bedrock", base_url="https://b.example")}
    with pytest.raises(ConfigError, match=r"providers\.bedrock\.region"):
        with_catalog(config, providers, config.raw.models)


def test_a_tenants_own_bedrock_keys_replace_only_the_key() -> None:
    own = join_key("AKIATENANT0000000001", "tenantSecret")

    class Tenant:
        own_providers = frozenset({"bedrock"})

        def own_key(self, provider: str) -> str | None:
            return own if provider == "bedrock" else None

        def endpoint(self, provider: str) -> ProviderConfig | None:
            return None

    target = Target(provider="bedrock", model="anthropic.claude-3-5-sonnet-20240620-v1:0", catalog_model="claude")
    call = resolve_call(Catalog(_config()), Tenant(), target, key_mode="own_then_shared", policy=Policy())
    assert call is not None and call.credential is Credential.OWN
    assert call.provider == ProviderConfig(
        kind="bedrock", base_url="https://bedrock-runtime.us-east-1.amazonaws.com", api_key=own, region="us-east-1"
    )


def test_the_admin_cli_sends_the_region() -> None:
    argv = [
        "catalog",
        "set-provider",
        "br",
        "--kind",
        "bedrock",
        "--base-url",
        "https://bedrock-runtime.us-east-1.amazonaws.com",
    ]
    args = build_parser().parse_args(["admin", "--key", "k", *argv, "--region", "us-east-1"])
    assert _request(args) == (
        "PUT",
        "/catalog/providers/br",
        {"kind": "bedrock", "base_url": "https://bedrock-runtime.us-east-1.amazonaws.com", "region": "us-east-1"},
    )


def test_an_orgs_own_bedrock_key_must_be_of_the_keys_form() -> None:
    text = BEDROCK + "orgs:\n  acme:\n    provider_keys: {bedrock: not-a-pair}\n"
    with pytest.raises(
        ConfigError, match=r"orgs\.acme\.provider_keys\.bedrock: a bedrock provider's key is ACCESS_KEY_ID"
    ):
        _config(text=text)
    good = BEDROCK + f"orgs:\n  acme:\n    provider_keys: {{bedrock: '{join_key('AKIAORG0000000000001', 's')}'}}\n"
    assert _config(text=good).raw.orgs["acme"].provider_keys["bedrock"] == "AKIAORG0000000000001:s"
