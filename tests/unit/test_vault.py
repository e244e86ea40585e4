"""Secrets at rest (SPEC §6): authenticated encryption, masked tails, rotation under a new key."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from turnout.vault import Sealed, SecretUnreadable, Vault, VaultUnavailable, generate_key, mask

CANARY = "sk-canary-5f1c2d9e8b7a6f5e4d3c2b1a"


def test_seal_hides_the_secret_and_keeps_only_a_tail() -> None:
    vault = Vault([generate_key()])
    sealed = vault.seal(CANARY)
    assert CANARY not in sealed.token and sealed.tail == CANARY[-4:]
    assert mask(sealed.tail) == "…2b1a"
    assert vault.open(sealed) == CANARY


def test_short_secret_gets_no_tail() -> None:
    assert Vault([generate_key()]).seal("abcd1234").tail == ""


def test_a_tampered_token_does_not_open() -> None:
    vault = Vault([generate_key()])
    sealed = vault.seal(CANARY)
    tampered = Sealed(token=sealed.token[:-6] + ("A" if sealed.token[-6] != "A" else "B") + sealed.token[-5:],
                      tail=sealed.tail)
    with pytest.raises(SecretUnreadable):
        vault.open(tampered)


def test_another_key_does_not_open() -> None:
    sealed = Vault([generate_key()]).seal(CANARY)
    with pytest.raises(SecretUnreadable):
        Vault([generate_key()]).open(sealed)


def test_no_key_configured_refuses_to_seal_or_open() -> None:
    vault = Vault.from_env({})
    assert not vault.available
    with pytest.raises(VaultUnavailable, match="TURNOUT_SECRET_KEY"):
        vault.seal(CANARY)


def test_malformed_key_is_refused_without_echoing_it() -> None:
    with pytest.raises(ValueError) as info:
        Vault.from_env({"TURNOUT_SECRET_KEY": "not-a-fernet-key-but-secret"})
    assert "not-a-fernet-key-but-secret" not in str(info.value)
    assert "key #1" in str(info.value)


def test_rotation_reencrypts_under_the_new_key_so_the_old_one_can_go() -> None:
    old, new = generate_key(), generate_key()
    sealed = Vault([old]).seal(CANARY)
    both = Vault.from_env({"TURNOUT_SECRET_KEY": f"{new}, {old}"})
    assert both.open(sealed) == CANARY  # old tokens still open during the rollover
    rotated = both.rotate(sealed)
    assert rotated.tail == sealed.tail and rotated.token != sealed.token
    assert Vault([new]).open(rotated) == CANARY
    with pytest.raises(SecretUnreadable):
        Vault([old]).open(rotated)
    assert Fernet(new.encode()).decrypt(rotated.token.encode()).decode() == CANARY
