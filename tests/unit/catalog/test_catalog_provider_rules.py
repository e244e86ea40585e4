"""A catalog provider never reads its key from one of Turnout's own variables, nor points at a
link-local or cloud metadata address (turnout.rules.provider_rules): in the file, in a catalog
edit (the admin API's check) and in a stored catalog."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from turnout.catalog.doc import config_of, resolve_key
from turnout.config import ModelConfig, OfferConfig, parse_config
from turnout.errors import ConfigError
from turnout.rules.provider_rules import OWN_VARIABLE, OWN_VARIABLE_SENT, check_key_env, key_env_refusal
from turnout.stored.catalog import CatalogDoc, KeyRef, ProviderEntry
from turnout.vault import Vault, generate_key
from turnout_cli.main import main

NOT_A_NAME = "must be an environment variable name"
VAULT = Vault([generate_key()])
ENV = {
    "TURNOUT_SECRET_KEY": "the-vault-master-key",
    "TURNOUT_OPERATOR_KEY": "op-key-0001",
    "TURNOUT_REDIS_URL": "redis://:password@127.0.0.1:6379/0",
    "TURNOUT_KEY_APP": "tk-app-key-00000001",
    "MY_SECRET_KEY": "sk-mine",
    "MY_OPERATOR_KEY": "sk-mine-too",
    "MY_REDIS_URL": "sk-mine-three",
}

FILE_TEXT = """
providers:
  p: {kind: openai_compatible, base_url: "BASE", api_key: "PROVIDER_KEY"}
models:
  m: {offers: [{provider: p, model: m}]}
orgs:
  acme:
    provider_keys: {p: "BYOK_KEY"}
    custom_endpoints: {vllm: {base_url: "https://vllm.example/v1", api_key: "ENDPOINT_KEY"}}
    keys:
      - {name: app, key: "${TURNOUT_KEY_APP}"}
"""


def file_text(
    base: str = "https://p.example/v1", provider_key: str = "sk-p", byok: str = "sk-byok", endpoint: str = "sk-e"
) -> str:
    """A valid file (its gateway key read from `TURNOUT_KEY_APP`) with the given provider fields."""
    return (
        FILE_TEXT.replace("BASE", base)
        .replace("PROVIDER_KEY", provider_key)
        .replace("BYOK_KEY", byok)
        .replace("ENDPOINT_KEY", endpoint)
    )


FILE = parse_config(file_text(), env=ENV)


def doc_with(entry: ProviderEntry) -> CatalogDoc:
    """The file's catalog with provider `p` replaced (what an admin edit validates)."""
    return CatalogDoc(providers={"p": entry}, models={"m": ModelConfig(offers=[OfferConfig(provider="p", model="m")])})


def env_ref(name: str) -> ProviderEntry:
    return ProviderEntry(kind="openai_compatible", base_url="https://p.example/v1", key=KeyRef(source="env", name=name))


# --------------------------------------------------------------------- api_key_env


@pytest.mark.parametrize(
    "name", ["TURNOUT_SECRET_KEY", "TURNOUT_OPERATOR_KEY", "TURNOUT_REDIS_URL", "turnout_secret_key", "Turnout_Any"]
)
def test_a_key_read_from_one_of_turnouts_own_variables_is_refused_naming_the_field(name: str) -> None:
    with pytest.raises(ConfigError) as edit:
        config_of(doc_with(env_ref(name)), FILE, ENV, VAULT)
    assert str(edit.value) == f"providers.p.api_key_env: {OWN_VARIABLE}"
    with pytest.raises(ConfigError, match=r"^api_key_env: must not name one of Turnout's own variables"):
        check_key_env("api_key_env", name)


@pytest.mark.parametrize(
    "name", ["", "1KEY", "MY-KEY", "MY KEY", "KEY\n", "KEY\u00e9", "\u043a\u043b\u044e\u0447", "A" * 129]
)
def test_a_key_variable_that_is_no_environment_variable_name_is_refused(name: str) -> None:
    with pytest.raises(ConfigError) as edit:
        config_of(doc_with(env_ref(name)), FILE, ENV, VAULT)
    assert str(edit.value).startswith(f"providers.p.api_key_env: {NOT_A_NAME}")
    assert key_env_refusal(name) is not None


def test_only_names_starting_with_turnout_are_turnouts_own() -> None:
    accepted = ["OPENAI_API_KEY", "MY_PROVIDER_KEY", "MY_TURNOUT_KEY", "TURNOUTISH_KEY", "_KEY", "K" * 128]
    for name in accepted:
        assert key_env_refusal(name) is None, name
        config = config_of(doc_with(env_ref(name)), FILE, {name: "sk-from-env"}, VAULT)
        assert config.raw.providers["p"].api_key == "sk-from-env"
    with pytest.raises(ConfigError, match=r"^providers\.p\.api_key_env: must not name"):
        config_of(doc_with(env_ref("TURNOUT_")), FILE, {"TURNOUT_": "x"}, VAULT)


def test_a_stored_reference_to_turnouts_own_variable_reads_as_no_key(caplog: pytest.LogCaptureFixture) -> None:
    """A document written before the rule: served unchecked (`check=False`), its key is never read."""
    ref = KeyRef(source="env", name="TURNOUT_SECRET_KEY")
    with caplog.at_level(logging.ERROR, logger="turnout.catalog"):
        assert resolve_key("p", ref, FILE, ENV, VAULT) is None
        served = config_of(doc_with(env_ref("TURNOUT_SECRET_KEY")), FILE, ENV, VAULT, check=False)
    assert served.raw.providers["p"].api_key is None
    assert "provider p: api_key_env must not name" in caplog.text
    assert "the-vault-master-key" not in caplog.text
    assert resolve_key("p", KeyRef(source="env", name="MY_SECRET_KEY"), FILE, ENV, VAULT) == "sk-mine"


@pytest.mark.parametrize(
    ("fields", "path", "variable"),
    [
        ({"provider_key": "${TURNOUT_SECRET_KEY}"}, "providers.p.api_key", "TURNOUT_SECRET_KEY"),
        ({"provider_key": "${turnout_operator_key:-sk-default}"}, "providers.p.api_key", "turnout_operator_key"),
        ({"provider_key": "sk-${TURNOUT_REDIS_URL}"}, "providers.p.api_key", "TURNOUT_REDIS_URL"),
        ({"byok": "${TURNOUT_SECRET_KEY}"}, "orgs.acme.provider_keys.p", "TURNOUT_SECRET_KEY"),
        ({"endpoint": "${TURNOUT_SECRET_KEY}"}, "orgs.acme.custom_endpoints.vllm.api_key", "TURNOUT_SECRET_KEY"),
    ],
)
def test_a_file_key_read_from_one_of_turnouts_own_variables_is_refused_at_load(
    fields: dict[str, str], path: str, variable: str
) -> None:
    with pytest.raises(ConfigError) as load:
        parse_config(file_text(**fields), env=ENV)
    assert str(load.value) == f"{path}: `${{{variable}}}` {OWN_VARIABLE}"
    mine = {k: v.replace("TURNOUT_", "MY_").replace("turnout_", "MY_") for k, v in fields.items()}
    parse_config(file_text(**mine), env=ENV)  # any other variable reads as before


@pytest.mark.parametrize(
    ("text", "path"),
    [
        (
            (
                'providers:\n  p: {kind: openai_compatible, base_url: "http://127.0.0.1:1/${TURNOUT_SECRET_KEY}/v1"}\n'
                "models:\n  m: {offers: [{provider: p, model: m}]}\n"
            ),
            "providers.p.base_url",
        ),
        (
            (
                'providers:\n  p: {kind: openai_compatible, base_url: "http://127.0.0.1:1/v1"}\n'
                'models:\n  m: {offers: [{provider: p, model: "${TURNOUT_SECRET_KEY}"}]}\n'
            ),
            "models.m.offers[0].model",
        ),
    ],
    ids=["base-url", "offer-model"],
)
def test_a_url_or_model_name_read_from_one_of_turnouts_own_variables_is_refused_at_load(text: str, path: str) -> None:
    with pytest.raises(ConfigError) as load:
        parse_config(text, env=ENV)
    assert str(load.value) == f"{path}: `${{TURNOUT_SECRET_KEY}}` {OWN_VARIABLE_SENT}"
    parse_config(text.replace("TURNOUT_SECRET_KEY", "MY_PATH"), env={**ENV, "MY_PATH": "x"})


def test_turnout_config_check_names_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TURNOUT_KEY_APP", ENV["TURNOUT_KEY_APP"])  # the file would load without the rule
    monkeypatch.setenv("TURNOUT_SECRET_KEY", generate_key())  # a well-formed key: the process's settings check it
    path = tmp_path / "turnout.yaml"
    path.write_text(file_text(provider_key="${TURNOUT_SECRET_KEY}"), encoding="utf-8")
    assert main(["config", "check", str(path)]) == 1
    err = capsys.readouterr().err
    assert err == f"invalid: {path}: providers.p.api_key: `${{TURNOUT_SECRET_KEY}}` {OWN_VARIABLE}\n"


# --------------------------------------------------------------------- base_url

REFUSED_URLS = [
    ("http://169.254.169.254/v1", "169.254.169.254 is a cloud metadata address"),
    ("http://169.254.169.254./latest", "169.254.169.254 is a cloud metadata address"),
    ("http://2852039166/v1", "169.254.169.254 is a cloud metadata address"),  # decimal, as the resolver reads it
    ("http://0xa9.0xfe.0xa9.0xfe/v1", "169.254.169.254 is a cloud metadata address"),
    ("http://[fd00:ec2::254]/v1", "fd00:ec2::254 is a cloud metadata address"),
    ("http://[::ffff:169.254.169.254]/v1", "is an IPv4-mapped IPv6 address of a cloud metadata address"),
    ("http://metadata.google.internal/computeMetadata/v1", "metadata.google.internal is a cloud metadata service name"),
    ("http://METADATA.Google.Internal.:80/v1", "metadata.google.internal is a cloud metadata service name"),
    ("http://169.254.10.1:8000/v1", "169.254.10.1 is a link-local address"),
    ("http://[fe80::1]:8000/v1", "fe80::1 is a link-local address"),
    ("http://[fe80::1%25eth0]:8000/v1", "fe80::1 is a link-local address"),
    ("http://metadata%2egoogle%2einternal/v1", "carries percent-encoding"),
]
ACCEPTED_URLS = [
    "http://127.0.0.1:18500/v1",
    "http://localhost:9100/v1",
    "http://[::1]:8000/v1",
    "http://10.0.0.5:8000/v1",
    "http://192.168.1.20/v1",
    "http://172.16.0.1/v1",
    "http://[fd12::1]/v1",
    "http://vllm.internal:8000/v1",
    "https://api.openai.com/v1",
    "http://169.253.169.254/v1",
]


@pytest.mark.parametrize(("url", "why"), REFUSED_URLS)
def test_a_provider_at_a_link_local_or_metadata_address_is_refused_naming_the_field(url: str, why: str) -> None:
    with pytest.raises(ConfigError) as load:
        parse_config(file_text(base=url), env=ENV)
    with pytest.raises(ConfigError) as edit:
        config_of(doc_with(ProviderEntry(kind="openai_compatible", base_url=url)), FILE, ENV, VAULT)
    for refused in (load, edit):
        message = str(refused.value)
        assert message.startswith("providers.p.base_url: ") and why in message, message
        assert message.endswith("a provider may not point at a link-local or cloud metadata address")


def test_a_provider_may_be_private_or_loopback_but_not_link_local() -> None:
    for url in ACCEPTED_URLS:
        assert parse_config(file_text(base=url), env=ENV).raw.providers["p"].base_url == url
        config_of(doc_with(ProviderEntry(kind="openai_compatible", base_url=url)), FILE, ENV, VAULT)
    with pytest.raises(ConfigError, match=r"^providers\.p\.base_url: 169\.254\.0\.1 is a link-local address"):
        parse_config(file_text(base="http://169.254.0.1/v1"), env=ENV)
