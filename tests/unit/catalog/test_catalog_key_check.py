"""`turnout.catalog.key_check`: a process that opens none of the catalog's sealed provider keys is refused."""

from __future__ import annotations

import msgspec
import pytest

from turnout.catalog.doc import doc_from_config, platform_key_binding
from turnout.catalog.key_check import SHOWN_PROVIDERS, refusal, sealed_providers
from turnout.config import parse_config
from turnout.stored.catalog import CatalogDoc, KeyRef, ProviderEntry
from turnout.vault import Vault, generate_key

FLEET_KEY = generate_key()
FLEET = Vault([FLEET_KEY])
OTHER = Vault([generate_key()])
NONE = Vault([])

FILE = parse_config(
    """
providers:
  east: {kind: openai_compatible, base_url: "https://east.example/v1", api_key: sk-east-key-0001}
  west: {kind: openai_compatible, base_url: "https://west.example/v1", api_key: sk-west-key-0001}
  open: {kind: openai, base_url: "https://open.example/v1"}
models:
  m: {offers: [{provider: east, model: m}, {provider: west, model: m}, {provider: open, model: m}]}
""",
    env={},
)
SEALED = doc_from_config(FILE, FLEET)


def test_the_sealed_providers_are_those_with_a_sealed_key() -> None:
    assert sealed_providers(SEALED) == ["east", "west"]
    assert sealed_providers(doc_from_config(FILE, NONE)) == []  # no vault: file references


@pytest.mark.parametrize("vault", [FLEET, Vault([generate_key(), FLEET_KEY])], ids=["the-key", "rotating-to-a-new-key"])
def test_a_process_with_the_fleets_key_starts(vault: Vault) -> None:
    assert refusal(SEALED, vault, service="turnout worker") is None


def test_a_process_without_a_secret_key_is_refused_with_the_fix_named() -> None:
    why = refusal(SEALED, NONE, service="turnout worker")
    assert why is not None
    assert why.startswith("turnout worker refused to start: ")
    assert "east, west" in why and "TURNOUT_SECRET_KEY is not set" in why
    assert ".turnout/secret.key" in why and "TURNOUT_CATALOG_FROM_FILE=1" in why


def test_a_process_with_another_key_is_refused() -> None:
    why = refusal(SEALED, OTHER, service="turnout ingress")
    assert why is not None and "no key in this process's TURNOUT_SECRET_KEY opens them" in why


def test_one_stale_key_among_others_that_open_does_not_refuse() -> None:
    stale = msgspec.structs.replace(
        SEALED.providers["west"],
        key=KeyRef(source="sealed", sealed=OTHER.seal("sk-west-key-0001", platform_key_binding("west"))),
    )
    doc = msgspec.structs.replace(SEALED, providers={**SEALED.providers, "west": stale})
    assert refusal(doc, FLEET, service="turnout worker") is None
    assert refusal(doc, NONE, service="turnout worker") is not None


def test_a_catalog_without_sealed_keys_never_refuses() -> None:
    plain = doc_from_config(FILE, NONE)
    assert refusal(plain, NONE, service="turnout worker") is None
    assert refusal(plain, OTHER, service="turnout worker") is None


def test_a_key_sealed_for_another_provider_does_not_count_as_opened() -> None:
    moved = msgspec.structs.replace(SEALED.providers["west"], key=SEALED.providers["east"].key)
    doc = CatalogDoc(providers={"west": moved}, models={}, origin="api")
    assert refusal(doc, FLEET, service="turnout worker") is not None  # bound to `east`, found at `west`


def test_many_providers_are_counted_past_the_shown_ones() -> None:
    entry = SEALED.providers["east"]
    providers = {
        f"p{i:02d}": ProviderEntry(
            kind=entry.kind,
            base_url=entry.base_url,
            key=KeyRef(source="sealed", sealed=FLEET.seal("sk-x-key-0001", platform_key_binding(f"p{i:02d}"))),
        )
        for i in range(SHOWN_PROVIDERS + 3)
    }
    why = refusal(CatalogDoc(providers=providers, models={}, origin="api"), NONE, service="turnout worker")
    assert why is not None and "p00, p01, p02, p03, p04 and 3 more" in why
