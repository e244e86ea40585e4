"""Which API keys the simulator accepts.

Owns: the rule shared by the OpenAI and Anthropic routes — any non-empty key
is accepted, except a revoked one: a key starting with `REVOKED_PREFIX`
(case-sensitive) answers 401 as a provider answers a wrong or revoked key,
so tests can give one tenant a key the provider refuses while the platform
key keeps working.
Must not import: aiohttp or any wire module; pure functions.
"""

from __future__ import annotations

REVOKED_PREFIX = "sk-sim-revoked"
"""Keys starting with this are refused with 401 (`invalid_api_key` on the
OpenAI routes, `authentication_error` on the Anthropic route)."""


def revoked(key: str | None) -> bool:
    """True when `key` (the bare key, no `Bearer `) is a revoked one.

    Args:
        key: the key as sent, or None when there was none.
    """
    return key is not None and key.strip().startswith(REVOKED_PREFIX)


AWS_TEST_KEYS: dict[str, str] = {
    "AKIASIMULATOR0000001": "simulatorSecretKey0000000000000000000001",
    "AKIASIMULATOR0000002": "simulatorSecretKey0000000000000000000002",
}
"""AWS access key id -> secret access key the simulator knows: a Bedrock request signed with one
of these ids has its SigV4 signature verified (403 `InvalidSignatureException` when it does not
match); a well-formed signature from any other id is accepted unchecked, as a key the simulator
cannot know."""
AWS_REVOKED_PREFIX = "AKIAREVOKED"
"""Access key ids starting with this are refused with 403 `UnrecognizedClientException`."""


def bearer(header: str | None) -> str | None:
    """The credential of an `Authorization: Bearer <credential>` header, or None (no header,
    another scheme, or an empty credential)."""
    scheme, _, credential = (header or "").partition(" ")
    return credential.strip() or None if scheme.lower() == "bearer" else None
