"""The catalog document, the bootstrap rule and the live swap, without Redis."""

from __future__ import annotations

import msgspec
import pytest

from turnout.catalog import Catalog
from turnout.catalog.doc import (
    config_of,
    doc_from_config,
    file_digest,
    platform_key_binding,
    resolve_key,
    rotate_keys,
    same_catalog,
)
from turnout.catalog.live import LiveCatalog
from turnout.config import Config, ModelConfig, OfferConfig, parse_config
from turnout.errors import ConfigError
from turnout.stored.catalog import KeyRef, ProviderEntry, doc_decoder, doc_encoder
from turnout.vault import Vault, generate_key

FILE = parse_config(
    """
providers:
  a: {kind: openai_compatible, base_url: "https://a.example/v1", api_key: sk-file-key-a-0001}
  b: {kind: openai, base_url: "https://b.example/v1"}
models:
  m1: {offers: [{provider: a, model: m1}]}
  m2: {offers: [{provider: b, model: m2}], order: priority}
policy:
  fallback: {models: [m2]}
""",
    env={},
)
VAULT = Vault([generate_key()])
NO_VAULT = Vault([])


def test_a_file_seeds_sealed_keys_with_a_vault_and_file_references_without() -> None:
    sealed = doc_from_config(FILE, VAULT)
    assert sealed.providers["a"].key is not None and sealed.providers["a"].key.source == "sealed"
    assert sealed.providers["b"].key is None
    assert b"sk-file-key-a-0001" not in doc_encoder.encode(sealed)
    plain = doc_from_config(FILE, NO_VAULT)
    assert plain.providers["a"].key == KeyRef(source="file")
    assert b"sk-file-key-a-0001" not in doc_encoder.encode(plain)
    assert sealed.origin == "file" and sealed.file_digest == file_digest(FILE)


@pytest.mark.parametrize("vault", [VAULT, NO_VAULT])
def test_the_document_of_a_file_gives_back_the_file_catalog(vault: Vault) -> None:
    doc = doc_decoder.decode(doc_encoder.encode(doc_from_config(FILE, vault)))
    config = config_of(doc, FILE, {}, vault)
    assert config.raw.providers == FILE.raw.providers
    assert config.raw.models == FILE.raw.models
    assert same_catalog(doc, FILE)


def test_the_digest_ignores_key_order_and_sees_every_change() -> None:
    reordered = parse_config(
        """
models:
  m2: {order: priority, offers: [{model: m2, provider: b}]}
  m1: {offers: [{provider: a, model: m1}]}
providers:
  b: {kind: openai, base_url: "https://b.example/v1"}
  a: {kind: openai_compatible, base_url: "https://a.example/v1", api_key: sk-file-key-a-0001}
policy:
  fallback: {models: [m2]}
""",
        env={},
    )
    assert file_digest(reordered) == file_digest(FILE)
    rekeyed = msgspec.structs.replace(
        FILE,
        raw=msgspec.structs.replace(
            FILE.raw,
            providers={
                **FILE.raw.providers,
                "a": msgspec.structs.replace(FILE.raw.providers["a"], api_key="sk-other-key-0002"),
            },
        ),
    )
    assert file_digest(rekeyed) != file_digest(FILE)


def test_same_catalog_sees_a_model_or_url_edited() -> None:
    doc = doc_from_config(FILE, VAULT)
    more = msgspec.structs.replace(doc, models={**doc.models, "m3": doc.models["m1"]})
    moved = msgspec.structs.replace(
        doc, providers={**doc.providers, "b": ProviderEntry(kind="openai", base_url="https://elsewhere.example/v1")}
    )
    assert same_catalog(doc, FILE)
    assert not same_catalog(more, FILE)
    assert not same_catalog(moved, FILE)


@pytest.mark.parametrize(
    ("ref", "env", "expected"),
    [
        (None, {}, None),
        (KeyRef(source="env", name="KEY_A"), {"KEY_A": "sk-from-env-0001"}, "sk-from-env-0001"),
        (KeyRef(source="env", name="KEY_A"), {}, None),
        (KeyRef(source="file"), {}, "sk-file-key-a-0001"),
        (KeyRef(source="sealed", sealed=VAULT.seal("sk-sealed-0001", platform_key_binding("a"))), {}, "sk-sealed-0001"),
        (KeyRef(source="sealed", sealed=VAULT.seal("sk-sealed-0001", platform_key_binding("b"))), {}, None),
    ],
)
def test_a_key_reference_resolves_in_this_process(
    ref: KeyRef | None, env: dict[str, str], expected: str | None
) -> None:
    assert resolve_key("a", ref, FILE, env, VAULT) == expected


def test_a_key_sealed_with_a_vault_key_this_process_lacks_reads_as_none() -> None:
    ref = KeyRef(source="sealed", sealed=VAULT.seal("sk-sealed-0001", platform_key_binding("a")))
    assert resolve_key("a", ref, FILE, {}, Vault([generate_key()])) is None
    assert resolve_key("a", ref, FILE, {}, NO_VAULT) is None


def test_the_key_view_never_shows_the_key() -> None:
    sealed = KeyRef(source="sealed", sealed=VAULT.seal("sk-sealed-0001", platform_key_binding("a")))
    assert sealed.view() == {"source": "sealed", "tail": "…0001"}
    assert KeyRef(source="env", name="X").view() == {"source": "env", "name": "X"}
    assert KeyRef(source="file").view() == {"source": "file"}


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (
            lambda d: msgspec.structs.replace(
                d, models={**d.models, "m3": ModelConfig(offers=[OfferConfig(provider="zz", model="x")])}
            ),
            "models.m3.offers[0].provider",
        ),
        (lambda d: msgspec.structs.replace(d, models={**d.models, "m3": ModelConfig(offers=[])}), "models.m3.offers"),
        (
            lambda d: msgspec.structs.replace(
                d, providers={**d.providers, "c": ProviderEntry(kind="openai", base_url="ftp://c")}
            ),
            "providers.c.base_url",
        ),
        (lambda d: msgspec.structs.replace(d, models={"m1": d.models["m1"]}), "policy.fallback.models[0]"),
        (lambda d: msgspec.structs.replace(d, models={}), "models"),
    ],
)
def test_an_edit_obeys_the_rules_of_the_file(edit: object, path: str) -> None:
    doc = edit(doc_from_config(FILE, VAULT))  # type: ignore[operator]
    with pytest.raises(ConfigError) as caught:
        config_of(doc, FILE, {}, VAULT)
    assert str(caught.value).startswith(path + ":")
    config_of(doc, FILE, {}, VAULT, check=False)  # what a disagreeing process serves anyway


def test_a_swap_replaces_the_whole_catalog_and_tells_the_listeners() -> None:
    live = LiveCatalog(FILE)
    before = live.current
    seen: list[tuple[Config, Catalog]] = []
    live.on_swap(lambda config, catalog: seen.append((config, catalog)))

    def failing(config: Config, catalog: Catalog) -> None:
        raise ZeroDivisionError("a listener that fails")

    live.on_swap(failing)  # a failing listener is logged, the swap stands
    smaller = msgspec.structs.replace(FILE, raw=msgspec.structs.replace(FILE.raw, models={"m2": FILE.raw.models["m2"]}))
    swapped = live.swap(smaller, 7)
    assert live.current is swapped and live.version == 7 and live.config is smaller
    assert set(swapped.models) == {"m2"}
    assert set(before.models) == {"m1", "m2"}  # a request holding the old snapshot keeps it whole
    assert seen == [(smaller, swapped)]
    assert swapped.prices.keys() == before.prices.keys()  # an attempt in flight on a removed model is priced


def test_rotation_reseals_every_sealed_key_under_the_newest_vault_key() -> None:
    old_key = generate_key()
    old = Vault([old_key])
    doc = msgspec.structs.replace(
        doc_from_config(FILE, old),
        providers={
            **doc_from_config(FILE, old).providers,
            "b": ProviderEntry(kind="openai", base_url="https://b.example/v1", key=KeyRef(source="env", name="B")),
        },
    )
    new_key = generate_key()
    both = Vault([new_key, old_key])
    rotated, count = rotate_keys(doc, both)
    assert count == 1
    assert rotated.providers["b"] == doc.providers["b"]  # a reference is left alone
    assert resolve_key("a", rotated.providers["a"].key, FILE, {}, Vault([new_key])) == "sk-file-key-a-0001"
    assert rotate_keys(doc_from_config(FILE, NO_VAULT), both) == (doc_from_config(FILE, NO_VAULT), 0)
