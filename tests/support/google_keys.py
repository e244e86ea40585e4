"""Service-account key files for tests of Vertex AI: the simulator's (`turnout_sim.key_file`), with
the test account's email."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from turnout_sim import key_file

CLIENT_EMAIL = "turnout-test@my-proj.iam.gserviceaccount.com"


def service_account_info(token_uri: str, client_email: str = CLIENT_EMAIL) -> dict[str, Any]:
    """A service-account key file's content whose token endpoint is `token_uri`."""
    return key_file.service_account_info(token_uri, client_email)


def write_key_file(path: Path, token_uri: str, client_email: str = CLIENT_EMAIL) -> Path:
    """Write `service_account_info` to `path`; returns `path`."""
    return key_file.write_key_file(path, token_uri, client_email)
