"""Service-account key files for tests of Vertex AI: a fresh RSA key, the token endpoint given.

The files have the shape Google issues (https://cloud.google.com/iam/docs/keys-create-delete):
`type: service_account`, `client_email`, `private_key` (PKCS#8 PEM), `token_uri`, ...; the
simulator's `POST /token` accepts their JWT-bearer grant (`turnout_sim.google_token`).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

CLIENT_EMAIL = "turnout-test@my-proj.iam.gserviceaccount.com"


@functools.cache
def _private_key_pem() -> str:
    """One 2048-bit RSA key per test process (PKCS#8 PEM): making one takes tens of ms."""
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
    """Write `service_account_info` to `path`; returns `path`."""
    path.write_text(json.dumps(service_account_info(token_uri, client_email)))
    return path
