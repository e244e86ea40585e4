"""Service-account key files for the simulator's Vertex AI routes: a fresh RSA key, the token endpoint given.

Owns: `service_account_info` / `write_key_file`, a key file of the shape Google issues
(https://cloud.google.com/iam/docs/keys-create-delete: `type: service_account`, `client_email`,
`private_key` as PKCS#8 PEM, `token_uri`, ...) whose `token_uri` is the simulator's `POST /token`
(`google_token`), so a `vertex` provider (or google-auth, google-genai) can point at the
simulator (`turnout sim --write-key-file PATH`). The key is made here and signs nothing the
simulator checks: it is a test key, never a real account's.
Must not import: turnout's gateway packages.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

CLIENT_EMAIL = "turnout-sim@my-proj.iam.gserviceaccount.com"
"""The account a key file names (one starting with `sk-sim-revoked` is refused its tokens)."""


@functools.cache
def _private_key_pem() -> str:
    """One 2048-bit RSA key per process (PKCS#8 PEM): making one takes tens of ms."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def service_account_info(token_uri: str, client_email: str = CLIENT_EMAIL) -> dict[str, Any]:
    """A service-account key file's content whose token endpoint is `token_uri`."""
    return {
        "type": "service_account",
        "project_id": "my-proj",
        "private_key_id": "0123456789abcdef",
        "private_key": _private_key_pem(),
        "client_email": client_email,
        "client_id": "100000000000000000001",
        "token_uri": token_uri,
    }


def write_key_file(path: Path, token_uri: str, client_email: str = CLIENT_EMAIL) -> Path:
    """Write `service_account_info` to `path` (readable by its owner only); returns `path`."""
    path.write_text(json.dumps(service_account_info(token_uri, client_email)))
    path.chmod(0o600)
    return path
