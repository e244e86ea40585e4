"""What admin reads show of an org document: secrets masked to a tail (`…a1b2`), key digests
never shown, times as ISO-8601 UTC (SPEC §6).

Owns: the JSON views the admin API answers with (`org_view`, `key_view`,
`provider_key_view`, `endpoint_view`, `settings_view`, `clamps_view`).
Must not import: services, FastAPI, arq, httpx, Redis.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import msgspec

from turnout.core.policy import Clamp
from turnout.core.scopes import SETTING_NAMES, ScopeSettings
from turnout.scrub import redact_shapes
from turnout.stored.orgs import EndpointDoc, KeyDoc, OrgDoc, ProviderKeyDoc
from turnout.tenancy.admin import LATEST_S
from turnout.vault import mask


def iso(epoch_s: float | None) -> str | None:
    """Epoch seconds as ISO-8601 UTC, or None (a stored time outside 1970..9999 is shown at the nearest end)."""
    if epoch_s is None:
        return None
    when = LATEST_S if math.isnan(epoch_s) else min(max(epoch_s, 0.0), LATEST_S)
    return datetime.fromtimestamp(when, UTC).isoformat().replace("+00:00", "Z")


def settings_view(settings: ScopeSettings) -> dict[str, Any]:
    """Set fields with their values; the others listed under `inherit`."""
    values: dict[str, Any] = msgspec.to_builtins(settings)
    return {"settings": values, "inherit": [n for n in SETTING_NAMES if n not in values]}


def key_view(key: KeyDoc, now_s: float) -> dict[str, Any]:
    """A key as admin reads show it: never the secret nor its digest."""
    status = "revoked" if key.revoked_s is not None else ("expired" if not key.usable(now_s) else "active")
    return {
        "name": key.name,
        "prefix": key.prefix + "…",
        "squad": key.squad,
        "admin": key.admin,
        "status": status,
        "created_at": iso(key.created_s),
        "expires_at": iso(key.expires_s),
        "revoked_at": iso(key.revoked_s),
        "origin": key.meta.origin,
        **settings_view(key.settings),
    }


def provider_key_view(provider: str, stored: ProviderKeyDoc) -> dict[str, Any]:
    """A BYOK key as admin reads show it: the masked tail only."""
    return {
        "provider": provider,
        "api_key": mask(stored.secret.tail),
        "origin": stored.meta.origin,
        "updated_at": iso(stored.meta.updated_s),
    }


def endpoint_view(name: str, stored: EndpointDoc) -> dict[str, Any]:
    """A custom endpoint as admin reads show it (key masked; the query of a URL stored before
    credentials in URLs were refused shown as `?[redacted]`)."""
    return {
        "id": name,
        "base_url": redact_shapes(stored.base_url),
        "api_key": mask(stored.secret.tail) if stored.secret is not None else None,
        **({"auth": msgspec.to_builtins(stored.auth)} if stored.auth is not None else {}),
        **({"headers": {h: mask(v.tail) for h, v in stored.headers.items()}} if stored.headers is not None else {}),
        "origin": stored.meta.origin,
        "updated_at": iso(stored.meta.updated_s),
    }


def org_view(doc: OrgDoc, now_s: float) -> dict[str, Any]:
    """An org's summary: settings, squads, key counts, BYOK and endpoints (masked)."""
    active = sum(k.usable(now_s) for k in doc.keys.values())
    return {
        "id": doc.id,
        "created_at": iso(doc.created_s),
        **settings_view(doc.settings),
        "squads": {n: settings_view(s.settings) for n, s in doc.squads.items()},
        "keys": {"total": len(doc.keys), "active": active},
        "provider_keys": [provider_key_view(p, k) for p, k in doc.provider_keys.items()],
        "custom_endpoints": [endpoint_view(n, e) for n, e in doc.custom_endpoints.items()],
    }


def clamps_view(clamps: list[Clamp]) -> list[dict[str, Any]]:
    """The clamped fields of a save (SPEC §4: reported to the caller)."""
    return [msgspec.to_builtins(c) for c in clamps]
