"""Encryption at rest of tenant secrets (SPEC §6: provider keys encrypted at rest).

Owns: sealing and opening provider keys and custom endpoint keys with
authenticated encryption (Fernet: AES-128-CBC + HMAC-SHA256, via
`cryptography`'s `MultiFernet` for rotation), the masked form admin reads
show (`…a1b2`), and generating a key.
Must not import: services, FastAPI, arq, httpx.

Key material: `TURNOUT_SECRET_KEY` holds one or more Fernet keys separated
by commas, newest first. The first one encrypts; every one decrypts. Rotation
(README "Tenancy and keys"): put a new key first, restart the fleet, run
`turnout admin rotate-secrets` (re-encrypts every stored secret under the
first key), then drop the old key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import msgspec
from cryptography.fernet import Fernet, InvalidToken, MultiFernet

SECRET_KEY_ENV = "TURNOUT_SECRET_KEY"
TAIL_CHARS = 4


class VaultUnavailable(RuntimeError):
    """No `TURNOUT_SECRET_KEY` is configured, so no secret can be stored or read."""


class SecretUnreadable(RuntimeError):
    """A stored secret does not open with any configured key (wrong or rotated-out key)."""


class Sealed(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A secret as stored: the Fernet token and the last characters for display.

    Attributes:
        token: the Fernet token (URL-safe base64; authenticated).
        tail: the secret's last `TAIL_CHARS` characters (what admin reads
            show after `…`).
    """

    token: str
    tail: str


def mask(tail: str) -> str:
    """The form an admin read shows: `…` and the last characters."""
    return f"…{tail}"


def generate_key() -> str:
    """A new Fernet key (32 random bytes, URL-safe base64) for `TURNOUT_SECRET_KEY`."""
    return Fernet.generate_key().decode("ascii")


class Vault:
    """Seals and opens secrets with the configured keys.

    Args:
        keys: Fernet keys, newest (the encrypting one) first; empty means no
            key is configured (every operation raises `VaultUnavailable`).

    Raises:
        ValueError: a key is not a valid Fernet key (message names its
            position, never its value).
    """

    def __init__(self, keys: list[str]) -> None:
        fernets: list[Fernet] = []
        for i, key in enumerate(keys):
            try:
                fernets.append(Fernet(key.strip().encode("ascii")))
            except (ValueError, UnicodeEncodeError) as exc:
                raise ValueError(
                    f"{SECRET_KEY_ENV}: key #{i + 1} is not a Fernet key (32 url-safe base64-encoded bytes; "
                    "generate one with `turnout admin gen-secret-key`)"
                ) from exc
        self._fernet = MultiFernet(fernets) if fernets else None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Vault":
        """The vault of `TURNOUT_SECRET_KEY` (comma-separated, newest first)."""
        value = (os.environ if env is None else env).get(SECRET_KEY_ENV, "")
        return cls([k for k in value.split(",") if k.strip()])

    @property
    def available(self) -> bool:
        """True when a key is configured."""
        return self._fernet is not None

    def _require(self) -> MultiFernet:
        if self._fernet is None:
            raise VaultUnavailable(
                f"{SECRET_KEY_ENV} is not set: provider keys cannot be stored or read "
                "(generate one with `turnout admin gen-secret-key`)"
            )
        return self._fernet

    def seal(self, secret: str) -> Sealed:
        """Encrypt `secret` under the newest key."""
        token = self._require().encrypt(secret.encode("utf-8")).decode("ascii")
        return Sealed(token=token, tail=secret[-TAIL_CHARS:] if len(secret) > 2 * TAIL_CHARS else "")

    def open(self, sealed: Sealed) -> str:
        """Decrypt a stored secret.

        Raises:
            VaultUnavailable: no key configured.
            SecretUnreadable: no configured key opens it (or it was altered).
        """
        try:
            return self._require().decrypt(sealed.token.encode("ascii")).decode("utf-8")
        except InvalidToken as exc:
            raise SecretUnreadable("a stored secret does not open with any key in TURNOUT_SECRET_KEY") from exc

    def rotate(self, sealed: Sealed) -> Sealed:
        """Re-encrypt a stored secret under the newest key (same plaintext, same tail).

        Raises:
            VaultUnavailable / SecretUnreadable: as `open`.
        """
        try:
            token = self._require().rotate(sealed.token.encode("ascii")).decode("ascii")
        except InvalidToken as exc:
            raise SecretUnreadable("a stored secret does not open with any key in TURNOUT_SECRET_KEY") from exc
        return Sealed(token=token, tail=sealed.tail)
