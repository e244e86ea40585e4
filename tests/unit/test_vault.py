"""Secrets at rest (SPEC §6): AES-GCM bound to their place, masked tails, rotation under a new key,
legacy unbound tokens refused for use and bound by rotation."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from support.docs import all_text
from turnout.vault import (
    TAIL_CHARS,
    Sealed,
    SecretUnbound,
    SecretUnreadable,
    Vault,
    VaultUnavailable,
    endpoint_binding,
    generate_key,
    mask,
    provider_key_binding,
)

CANARY = "sk-canary-5f1c2d9e8b7a6f5e4d3c2b1a"
HERE = provider_key_binding("acme", "openai")


def test_seal_hides_the_secret_and_keeps_only_a_tail() -> None:
    vault = Vault([generate_key()])
    sealed = vault.seal(CANARY, HERE)
    assert CANARY not in sealed.token and sealed.tail == CANARY[-4:] and sealed.token.startswith("v2.")
    assert mask(sealed.tail) == "…2b1a"
    assert vault.open(sealed, HERE) == CANARY
    assert vault.seal(CANARY, HERE).token != sealed.token  # a fresh nonce per seal


def test_short_secret_gets_no_tail() -> None:
    assert Vault([generate_key()]).seal("abcd1234", HERE).tail == ""


@pytest.mark.parametrize(("secret", "shown"), [("sk-local", "…"), ("sk-local9", "…cal9"), ("", "…")])
def test_the_tail_starts_past_twice_its_length_as_readme_says(secret: str, shown: str) -> None:
    assert mask(Vault([generate_key()]).seal(secret, HERE).tail) == shown
    readme = " ".join(all_text().split())
    rule = f"The tail is the key's last {TAIL_CHARS} characters, and only for a key longer than {2 * TAIL_CHARS}"
    assert rule in readme


@pytest.mark.parametrize(
    "elsewhere",
    [provider_key_binding("beta", "openai"), provider_key_binding("acme", "groq"), endpoint_binding("acme", "openai")],
    ids=["another-org", "another-provider", "an-endpoint-of-the-same-name"],
)
def test_a_moved_token_does_not_open(elsewhere: object) -> None:
    vault = Vault([generate_key()])
    sealed = vault.seal(CANARY, HERE)
    with pytest.raises(SecretUnreadable, match="does not open for its place"):
        vault.open(sealed, elsewhere)  # type: ignore[arg-type]
    with pytest.raises(SecretUnreadable):
        vault.rotate(sealed, elsewhere)  # type: ignore[arg-type]


def test_a_tampered_token_does_not_open() -> None:
    vault = Vault([generate_key()])
    sealed = vault.seal(CANARY, HERE)
    flipped = sealed.token[:-6] + ("A" if sealed.token[-6] != "A" else "B") + sealed.token[-5:]
    for token in (flipped, "v2.not*base64", "v2."):
        with pytest.raises(SecretUnreadable):
            vault.open(Sealed(token=token, tail=sealed.tail), HERE)


def test_another_key_does_not_open() -> None:
    sealed = Vault([generate_key()]).seal(CANARY, HERE)
    with pytest.raises(SecretUnreadable):
        Vault([generate_key()]).open(sealed, HERE)


def test_no_key_configured_refuses_to_seal_or_open() -> None:
    vault = Vault.from_env({})
    with pytest.raises(VaultUnavailable, match="TURNOUT_SECRET_KEY"):
        vault.seal(CANARY, HERE)


def test_malformed_key_is_refused_without_echoing_it() -> None:
    with pytest.raises(ValueError) as info:
        Vault.from_env({"TURNOUT_SECRET_KEY": "not-a-fernet-key-but-secret"})
    assert "not-a-fernet-key-but-secret" not in str(info.value)
    assert "key #1" in str(info.value)


def test_rotation_reseals_under_the_new_key_so_the_old_one_can_go() -> None:
    old, new = generate_key(), generate_key()
    sealed = Vault([old]).seal(CANARY, HERE)
    both = Vault.from_env({"TURNOUT_SECRET_KEY": f"{new}, {old}"})
    assert both.open(sealed, HERE) == CANARY  # old tokens still open during the rollover
    rotated = both.rotate(sealed, HERE)
    assert rotated.tail == sealed.tail and rotated.token != sealed.token
    assert Vault([new]).open(rotated, HERE) == CANARY
    with pytest.raises(SecretUnreadable):
        Vault([old]).open(rotated, HERE)


def test_a_legacy_unbound_token_is_refused_for_use_and_bound_by_rotation() -> None:
    key = generate_key()
    vault = Vault([key])
    legacy = Sealed(token=Fernet(key.encode()).encrypt(CANARY.encode()).decode(), tail=CANARY[-4:])
    with pytest.raises(SecretUnbound, match="rotate-secrets"):
        vault.open(legacy, HERE)
    assert vault.open(legacy, HERE, legacy=True) == CANARY
    bound = vault.rotate(legacy, HERE)
    assert bound.token.startswith("v2.") and vault.open(bound, HERE) == CANARY
    with pytest.raises(SecretUnreadable):
        vault.open(bound, provider_key_binding("beta", "openai"))
