"""Encryption at rest of tenant secrets (SPEC §6: provider keys encrypted at rest).

Owns: sealing and opening provider keys and custom endpoint keys with
authenticated encryption bound to where the secret belongs, the masked form
admin reads show (`…a1b2`), and generating a key.
A leaf of the library (msgspec, and `cryptography` once used): the tenancy
wing seals the tenants' keys with it, the catalog the operator's, and the
stored documents (`turnout.stored`) hold its `Sealed` tokens.
Must not import: services, FastAPI, arq, httpx, any other `turnout` module.

Sealing: AES-256-GCM (`cryptography`'s AEAD), a random 96-bit nonce per
seal, and the secret's place — (org, `provider_key` | `custom_endpoint`,
provider or endpoint id), a `Binding` — as the associated data. A token
copied into another org's document, or to another provider or endpoint,
fails authentication and does not open (`SecretUnreadable`); the router
then treats the attempt as having no credential, so the secret is never
sent for the wrong place. Token: `v2.` + URL-safe base64 of nonce ‖
ciphertext ‖ tag.

Key material: `TURNOUT_SECRET_KEY` holds one or more keys separated by
commas, newest first, each 32 random bytes in URL-safe base64 (the format
`turnout admin gen-secret-key` prints, a Fernet key). The AES key is
derived from each with HKDF-SHA256 (RFC 5869; info `turnout vault
aes-256-gcm v2`). The first one encrypts; every one decrypts. Rotation
(README "Tenancy and keys"): put a new key first, restart the fleet, run
`turnout admin rotate-secrets` (re-seals every stored secret under the
first key, bound to its place), then drop the old key.

Secrets sealed before binding existed (Fernet tokens, no `v2.` prefix) are
refused for use (`SecretUnbound`: no credential) and opened only by
`rotate`, which re-seals each one bound to the place it is stored: after an
upgrade, run `turnout admin rotate-secrets` once.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

import msgspec

if TYPE_CHECKING:  # `cryptography` is imported once a key is configured or used (~9 MiB a process)
    from cryptography.fernet import Fernet
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

SECRET_KEY_ENV = "TURNOUT_SECRET_KEY"
TAIL_CHARS = 4
"""Characters of a secret an admin read shows (`…a1b2`), and only for a secret longer than
twice as many: a shorter one's tail would give away half of it or more (README "Secrets and the
SSRF guard")."""
TOKEN_PREFIX = "v2."
NONCE_BYTES = 12
_HKDF_INFO = b"turnout vault aes-256-gcm v2"


class VaultUnavailable(RuntimeError):
    """No `TURNOUT_SECRET_KEY` is configured, so no secret can be stored or read."""


class SecretUnreadable(RuntimeError):
    """A stored secret does not open: no configured key opens it for this place (moved to
    another org, provider or endpoint, altered, or its key rotated out)."""


class SecretUnbound(SecretUnreadable):
    """A secret sealed before binding (a Fernet token): refused for use until
    `turnout admin rotate-secrets` re-seals it bound to its place."""


class Binding(msgspec.Struct, frozen=True, kw_only=True):
    """Where a sealed secret belongs; the associated data of its seal.

    Attributes:
        org: the org id.
        kind: a BYOK key for a configured provider, a custom endpoint's key, or the value
            of an extra header of a provider or of a custom endpoint (`headers:`).
        name: the provider name, or the custom endpoint id (with `/<header>` for a header:
            `header_binding`).
    """

    org: str
    kind: Literal["provider_key", "custom_endpoint", "provider_header", "endpoint_header"]
    name: str

    def aad(self) -> bytes:
        """The associated data: the binding as a JSON array (unambiguous for any strings)."""
        return msgspec.json.encode(["turnout-secret-v2", self.org, self.kind, self.name])


def provider_key_binding(org: str, provider: str) -> Binding:
    """The place of `org`'s own key for `provider`."""
    return Binding(org=org, kind="provider_key", name=provider)


def endpoint_binding(org: str, endpoint: str) -> Binding:
    """The place of the key of `org`'s custom endpoint `endpoint`."""
    return Binding(org=org, kind="custom_endpoint", name=endpoint)


def header_binding(org: str, owner: str, header: str, *, endpoint: bool) -> Binding:
    """The place of the value of extra header `header` (case ignored) of provider `owner` (`org`
    "" for the operator's providers) or, with `endpoint`, of `org`'s custom endpoint `owner`.
    Provider names and endpoint ids hold no `/`, so `<owner>/<header>` names one place."""
    kind: Literal["provider_header", "endpoint_header"] = "endpoint_header" if endpoint else "provider_header"
    return Binding(org=org, kind=kind, name=f"{owner}/{header.lower()}")


class Sealed(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A secret as stored: the sealed token and the last characters for display.

    Attributes:
        token: `v2.` + URL-safe base64 of nonce, ciphertext and tag (module
            doc); a token without the prefix is a legacy Fernet token.
        tail: the secret's last `TAIL_CHARS` characters (what admin reads
            show after `…`); "" for a secret of `2 * TAIL_CHARS` characters
            or fewer (`TAIL_CHARS`).
    """

    token: str
    tail: str


def mask(tail: str) -> str:
    """The form an admin read shows: `…` and the last characters."""
    return f"…{tail}"


def generate_key() -> str:
    """A new key (32 random bytes, URL-safe base64; the Fernet key format) for `TURNOUT_SECRET_KEY`."""
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode("ascii")


def _derive(raw: bytes) -> AESGCM:
    """The AES-256-GCM key derived from one configured key (HKDF-SHA256, RFC 5869)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return AESGCM(HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO).derive(raw))


class Vault:
    """Seals and opens secrets with the configured keys, bound to their place.

    Args:
        keys: keys (32 bytes, URL-safe base64), newest (the encrypting one)
            first; empty means no key is configured (every operation raises
            `VaultUnavailable`).

    Raises:
        ValueError: a key is not 32 URL-safe base64 bytes (message names its
            position, never its value).
    """

    def __init__(self, keys: list[str]) -> None:
        fernets: list[Fernet] = []
        aeads: list[AESGCM] = []
        if keys:
            from cryptography.fernet import Fernet, MultiFernet
        for i, key in enumerate(keys):
            try:
                encoded = key.strip().encode("ascii")
                fernets.append(Fernet(encoded))
                aeads.append(_derive(base64.urlsafe_b64decode(encoded)))
            except (ValueError, UnicodeEncodeError) as exc:
                raise ValueError(
                    f"{SECRET_KEY_ENV}: key #{i + 1} is not a Fernet key (32 url-safe base64-encoded bytes; "
                    "generate one with `turnout admin gen-secret-key`)"
                ) from exc
        self._legacy = MultiFernet(fernets) if fernets else None
        self._aeads = aeads

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Vault:
        """The vault of `TURNOUT_SECRET_KEY` (comma-separated, newest first)."""
        value = (os.environ if env is None else env).get(SECRET_KEY_ENV, "")
        return cls([k for k in value.split(",") if k.strip()])

    @property
    def configured(self) -> bool:
        """True when at least one key is configured (else every operation raises `VaultUnavailable`)."""
        return bool(self._aeads)

    def _require(self) -> list[AESGCM]:
        if not self._aeads:
            raise VaultUnavailable(
                f"{SECRET_KEY_ENV} is not set: provider keys cannot be stored or read "
                "(generate one with `turnout admin gen-secret-key`)"
            )
        return self._aeads

    def seal(self, secret: str, binding: Binding) -> Sealed:
        """Encrypt `secret` under the newest key, bound to `binding`.

        Raises:
            VaultUnavailable: no key configured.
        """
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._require()[0].encrypt(nonce, secret.encode("utf-8"), binding.aad())
        token = TOKEN_PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode("ascii")
        return Sealed(token=token, tail=secret[-TAIL_CHARS:] if len(secret) > 2 * TAIL_CHARS else "")

    def open(self, sealed: Sealed, binding: Binding, *, legacy: bool = False) -> str:
        """Decrypt a stored secret found at `binding`.

        Args:
            sealed: the stored secret.
            binding: where it was found (its org, kind and name).
            legacy: also open a token sealed before binding (rotation and
                the scrubber's index only; never for a request).

        Raises:
            VaultUnavailable: no key configured.
            SecretUnbound: a legacy token and `legacy` is False.
            SecretUnreadable: no configured key opens it for `binding`
                (moved, altered, or its key rotated out).
        """
        aeads = self._require()
        from cryptography.exceptions import InvalidTag
        from cryptography.fernet import InvalidToken, MultiFernet

        if not sealed.token.startswith(TOKEN_PREFIX):
            if not legacy:
                raise SecretUnbound("a stored secret was sealed before binding; run `turnout admin rotate-secrets`")
            legacy_keys = self._legacy or MultiFernet([])
            try:
                return legacy_keys.decrypt(sealed.token.encode("ascii")).decode("utf-8")
            except (InvalidToken, UnicodeEncodeError) as exc:
                raise SecretUnreadable("a stored secret does not open with any key in TURNOUT_SECRET_KEY") from exc
        try:
            raw = base64.urlsafe_b64decode(sealed.token[len(TOKEN_PREFIX) :].encode("ascii"))
        except (binascii.Error, ValueError) as exc:
            raise SecretUnreadable("a stored secret is not a valid token") from exc
        nonce, body = raw[:NONCE_BYTES], raw[NONCE_BYTES:]
        for aead in aeads:
            try:
                return aead.decrypt(nonce, body, binding.aad()).decode("utf-8")
            except (InvalidTag, ValueError):
                continue
        raise SecretUnreadable(
            f"a stored {binding.kind.replace('_', ' ')} does not open for its place "
            "(moved from another org, provider or endpoint, altered, or its key is not in TURNOUT_SECRET_KEY)"
        )

    def rotate(self, sealed: Sealed, binding: Binding) -> Sealed:
        """Re-seal a stored secret under the newest key, bound to `binding` (same plaintext, same tail).

        A legacy token is opened and bound to `binding`, where it is stored.

        Raises:
            VaultUnavailable / SecretUnreadable: as `open`.
        """
        secret = self.open(sealed, binding, legacy=True)
        return msgspec.structs.replace(self.seal(secret, binding), tail=sealed.tail)
