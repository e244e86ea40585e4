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


def bearer(header: str | None) -> str | None:
    """The credential of an `Authorization: Bearer <credential>` header, or None (no header,
    another scheme, or an empty credential)."""
    scheme, _, credential = (header or "").partition(" ")
    return credential.strip() or None if scheme.lower() == "bearer" else None
