"""The dashboard's key and provider key forms as admin API bodies (#45 item 8).

Owns: `key_patch` (a key's form — squad, admin, expiry — as the `PATCH .../keys/{key}` body the
admin API takes: only what changed; an empty squad or expiry is `null`, which is none), `key_create`
(the new key form as the `POST .../keys` body) and
`provider_key_put` (the provider key form as the `PUT .../provider-keys/{provider}` body). Nothing
here validates a value: the admin API's own decoding refuses it in its own words
(`turnout_ingress.admin.keys.key_edit`, `turnout_ingress.admin.provider_keys.provider_key_edit`).
Must not import: the UI's routes, FastAPI.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from turnout.stored.orgs import KeyDoc
from turnout.tenancy.views import iso

_json = msgspec.json.Encoder()

ADMIN_CHOICES = ("true", "false")


def key_values(key: KeyDoc) -> dict[str, str]:
    """A key's form texts: `squad` (`""`: none), `admin` (`true` / `false`), `expires_at` (ISO 8601, `""`: never)."""
    return {"squad": key.squad or "", "admin": "true" if key.admin else "false", "expires_at": iso(key.expires_s) or ""}


def key_patch(form: Mapping[str, str], key: KeyDoc) -> dict[str, Any]:
    """The `PATCH .../keys/{key}` body of the form's change to `key`: the fields whose text differs
    from the key's (`{}`: nothing to change). An `admin` other than `true` / `false` is passed on
    as text for the admin API to refuse; an expiry is passed on as written."""
    now = key_values(key)
    patch: dict[str, Any] = {}
    squad = form.get("squad", now["squad"]).strip()
    if squad != now["squad"]:
        patch["squad"] = squad or None
    admin = form.get("admin", now["admin"]).strip().lower()
    if admin != now["admin"]:
        patch["admin"] = {"true": True, "false": False}.get(admin, admin)
    expires = form.get("expires_at", now["expires_at"]).strip()
    if expires != now["expires_at"]:
        patch["expires_at"] = expires or None
    return patch


def key_create(form: Mapping[str, str]) -> dict[str, Any]:
    """The `POST .../keys` body of the new key form: `name` and `admin` always, `squad` and
    `expires_at` when given (an `admin` other than `true` / `false` passed on for the admin API to refuse)."""
    admin = form.get("admin", "false").strip().lower()
    body: dict[str, Any] = {
        "name": form.get("name", "").strip(),
        "admin": {"true": True, "false": False}.get(admin, admin),
    }
    for field in ("squad", "expires_at"):
        value = form.get(field, "").strip()
        if value:
            body[field] = value
    return body


def provider_key_put(form: Mapping[str, str]) -> bytes:
    """The `PUT .../provider-keys/{provider}` body of the form (`api_key` as typed, the admin API checks it)."""
    return _json.encode({"api_key": form.get("api_key", "")})
