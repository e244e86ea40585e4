"""A provider's active probe in the configuration (`ProbeConfig`, `provider_checks`; README "Active probes")."""

from __future__ import annotations

import pytest

from turnout.catalog.doc import config_of, doc_from_config, file_digest, same_catalog
from turnout.config import parse_config
from turnout.config.providers import ProbeConfig
from turnout.errors import ConfigError
from turnout.stored.catalog import doc_encoder
from turnout.vault import Vault

FILE = """
providers:
  p: {kind: KIND, base_url: https://api.example.com/v1, api_key: sk-test-key, PROBE}
models:
  m: {offers: [{provider: p, model: m}]}
"""


def _config(kind: str, probe: str) -> str:
    return FILE.replace("KIND", kind).replace(", PROBE", f", probe: {probe}" if probe else "")


def test_no_probe_is_none_and_off() -> None:
    provider = parse_config(_config("openai", "")).raw.providers["p"]
    assert provider.active_probe is None


@pytest.mark.parametrize(
    ("kind", "call"), [("openai", "models"), ("openai_compatible", "models"), ("anthropic", "tiny_request")]
)
def test_an_active_probe_and_its_call_by_kind(kind: str, call: str) -> None:
    provider = parse_config(_config(kind, "{active: true, interval_s: 2}")).raw.providers["p"]
    assert provider.active_probe == ProbeConfig(active=True, interval_s=2.0)
    assert provider.active_probe.call_for(provider.kind) == call


def test_a_probe_turned_off_is_none() -> None:
    assert parse_config(_config("openai", "{active: false}")).raw.providers["p"].active_probe is None


@pytest.mark.parametrize(
    ("kind", "probe", "words"),
    [
        ("anthropic", "{active: true, call: models}", "providers.p.probe.call: `models` (GET /models) needs"),
        ("openai", "{active: true, call: ping}", "providers.p.probe.call"),
        ("openai", "{active: true, interval_s: 0.1}", "providers.p.probe.interval_s"),
        ("openai", "{active: yes please}", "providers.p.probe.active"),
        ("openai", "{active: true, every: 5}", "providers.p.probe"),
    ],
)
def test_a_bad_probe_is_refused_naming_the_field(kind: str, probe: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(_config(kind, probe))
    assert words in str(caught.value), str(caught.value)


def test_an_active_probe_needs_the_operators_own_key() -> None:
    text = _config("openai", "{active: true}").replace(", api_key: sk-test-key", "")
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert "providers.p.probe.active: the fleet probes with the provider's own credential" in str(caught.value)


def test_the_probe_rides_the_stored_catalog_to_every_process() -> None:
    """A worker's catalog comes from Redis (`turnout.catalog.doc`): the probe is stored, read
    back, counts as a change of the file, and a provider without one stores nothing new."""
    vault = Vault([])
    with_probe = parse_config(_config("openai", "{active: true, interval_s: 2, call: tiny_request}"))
    without = parse_config(_config("openai", ""))
    doc = doc_from_config(with_probe, vault)
    back = config_of(doc, with_probe, {}, vault).raw.providers["p"]
    assert back.active_probe == ProbeConfig(active=True, interval_s=2.0, call="tiny_request")
    assert same_catalog(doc, with_probe) and not same_catalog(doc, without)
    assert file_digest(with_probe) != file_digest(without)
    assert b"probe" not in doc_encoder.encode(doc_from_config(without, vault))
    assert config_of(doc_from_config(without, vault), without, {}, vault).raw.providers["p"].active_probe is None
