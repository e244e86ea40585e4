"""The form of a Bedrock key as Turnout stores, seals and sends it through the credential seam (pure).

Owns: `join_key` / `split_key`: a `bedrock` provider's keys (`access_key_id`, `secret_access_key`,
`session_token`) are one secret everywhere a provider key goes — the stored catalog (sealed), the
admin API's `api_key`, a tenant's own key (BYOK), the attempt's `CallSpec.api_key` — of the form
`ACCESS_KEY_ID:SECRET_ACCESS_KEY` or `ACCESS_KEY_ID:SECRET_ACCESS_KEY:SESSION_TOKEN`. AWS access key
ids are `[A-Z0-9]`, secret keys and session tokens base64 (`A-Z a-z 0-9 + / =`): none holds `:`
(https://docs.aws.amazon.com/IAM/latest/UserGuide/id_credentials_access-keys.html).
Must not import: botocore, `turnout.adapters`, services, FastAPI, arq, httpx.
"""

from __future__ import annotations

from typing import Final, NamedTuple

KEY_FORM: Final = "ACCESS_KEY_ID:SECRET_ACCESS_KEY or ACCESS_KEY_ID:SECRET_ACCESS_KEY:SESSION_TOKEN"
"""How a message names the form (never the value)."""


class AwsKeys(NamedTuple):
    """A Bedrock key's parts (never logged)."""

    access_key_id: str
    secret_access_key: str
    session_token: str | None = None


def join_key(access_key_id: str, secret_access_key: str, session_token: str | None = None) -> str:
    """The one secret of a Bedrock provider's keys (module doc); no session token: two parts."""
    return ":".join([access_key_id, secret_access_key, *([session_token] if session_token else [])])


def split_key(key: str) -> AwsKeys:
    """The parts of a Bedrock key (`join_key`'s form).

    Raises:
        ValueError: not two or three non-empty parts separated by `:` (the message names
            the form, never the value).
    """
    parts = key.split(":")
    if len(parts) not in (2, 3) or not all(p.strip() == p and p for p in parts):
        raise ValueError(f"a Bedrock key is {KEY_FORM}")
    return AwsKeys(parts[0], parts[1], parts[2] if len(parts) == 3 else None)
