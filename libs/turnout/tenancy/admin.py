"""Admin operations on an org document: the admin API's logic without HTTP (SPEC §6).

Owns: the request bodies the admin API accepts (msgspec, unknown fields
refused), each edit as a pure function `OrgDoc -> (OrgDoc, result)` that
either returns the whole new document or raises `AdminError` (nothing is
written). What admin reads show of a document is `turnout.tenancy.views`.
Must not import: services, FastAPI, arq, httpx, Redis.
"""

from __future__ import annotations

import difflib
import re
from datetime import UTC, datetime
from typing import Any, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from turnout.core.field_values import in_words, with_close_field, with_enum_values
from turnout.core.scopes import SETTING_NAMES, ScopeSettings
from turnout.core.upstream_auth import ProviderAuth
from turnout.json_reason import json_reason, out_of_range
from turnout.stored.orgs import EndpointDoc, KeyDoc, Meta, OrgDoc, ProviderKeyDoc, SquadDoc
from turnout.tenancy.orgs import NAME_RE, hash_token, lookup_prefix, references
from turnout.vault import Sealed, Vault, endpoint_binding, header_binding, provider_key_binding

T = TypeVar("T")

ECHO_MAX_CHARS = 200
"""The longest run of a client's text an admin error repeats: a longer quoted value
or unbroken word (a 100 KB `key_mode`, a 5,000-character name in a path) is cut to
this many characters and its length named."""


_QUOTED = re.compile(r"(['`\"])([^'`\"]{" + str(ECHO_MAX_CHARS + 1) + r",})\1")
_WORD = re.compile(r"[^\s'`\".:,;()\[\]]{" + str(ECHO_MAX_CHARS + 1) + ",}")


def _cut(run: str) -> str:
    return f"{run[:ECHO_MAX_CHARS]} … ({len(run)} characters)"


def bounded(text: str) -> str:
    """`text` with every quoted value and unbroken word longer than `ECHO_MAX_CHARS` cut (`_cut`)."""
    if len(text) <= ECHO_MAX_CHARS:
        return text
    text = _QUOTED.sub(lambda m: f"{m[1]}{_cut(m[2])}{m[1]}", text)
    return _WORD.sub(lambda m: _cut(m[0]), text)


class AdminError(Exception):
    """An admin request refused; nothing was written.

    Attributes:
        status_code: 400 (invalid, `param` names the path), 404 (no such
            object, or another org's: the same answer), 409 (conflict).
        message / code / param: the OpenAI-format error fields; a client's
            text in them is cut to `ECHO_MAX_CHARS` (`bounded`).
    """

    def __init__(self, status_code: int, message: str, *, code: str, param: str | None = None) -> None:
        message = bounded(message)  # never an unbounded echo of what the client sent
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.code = code
        self.param = None if param is None else bounded(param)


NOT_FOUND_MESSAGE = "No such object."


def not_found() -> AdminError:
    """The one answer for a missing object and for another org's object."""
    return AdminError(404, NOT_FOUND_MESSAGE, code="not_found")


def invalid(path: str, message: str) -> AdminError:
    """A 400 naming the offending path."""
    return AdminError(400, f"{path}: {message}", code="invalid_value", param=path)


class OrgCreate(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`POST /admin/v1/orgs`."""

    id: str
    settings: ScopeSettings = ScopeSettings()


class SquadCreate(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`POST .../squads`."""

    name: str
    settings: ScopeSettings = ScopeSettings()


class KeyCreate(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`POST .../keys`; `expires_at` ISO-8601 or epoch seconds, or `ttl_s` from now."""

    name: str
    squad: str | None = None
    admin: bool = False
    expires_at: str | float | None = None
    ttl_s: float | None = None
    settings: ScopeSettings = ScopeSettings()


class KeyPatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`PATCH .../keys/{key}`: fields left out are unchanged; `null` clears squad / expiry."""

    squad: str | None | UnsetType = UNSET
    admin: bool | UnsetType = UNSET
    expires_at: str | float | None | UnsetType = UNSET


class NoFields(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The body of an action that takes none (`POST .../keys/{key}/revoke`): empty, or `{}`."""


class ProviderKeyPut(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`PUT .../provider-keys/{provider}`."""

    api_key: str


class EndpointPut(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`PUT .../custom-endpoints/{id}`; `api_key` None = the endpoint gets no key; `auth` and
    `headers` as a provider's (`turnout.core.upstream_auth`), each header value sealed like the key."""

    base_url: str
    api_key: str | None = None
    auth: ProviderAuth | None = None
    headers: dict[str, str] | None = None


def decode(body: bytes, tp: type[T], root: str = "") -> T:
    """Decode a JSON body into `tp`, or a 400 naming the offending field path.

    `param` is `root` joined with the field's path in the body
    (`settings.policy.retry.max_retries`); a number no float or int holds
    is found in the body and named too (`settings.budget.usd`, where msgspec
    says `$[...][...]` of an untyped decode), its reason quoting the number
    (`Number out of range (1e309)`; `turnout.json_reason.out_of_range`).
    """
    try:
        return msgspec.json.decode(body or b"{}", type=tp)
    except msgspec.ValidationError as exc:
        text = str(exc)
        huge = out_of_range(body, text)
        if huge is not None:
            at = huge.path if not huge.path or huge.path.startswith("[") else f".{huge.path}"
            raise invalid((root + at).lstrip(".") or "body", f"{huge.reason} ({huge.number})") from None
        where = re.search(r" - at `\$(.*)`", text)
        unknown = re.match(r"Object contains unknown field `([^`]*)`", text)
        path = (where.group(1) if where else "") + (f".{unknown.group(1)}" if unknown else "")
        full = (root + path).lstrip(".") or "body"
        reason = text.split(" - at ")[0]
        if unknown:
            reason = with_close_field(reason, tp, where.group(1) if where else "", unknown.group(1))
        elif where:  # msgspec names no value of an enum it refuses, and types by their names
            reason = in_words(with_enum_values(reason, tp, where.group(1)), tp, where.group(1))
        raise invalid(full, reason) from None
    except msgspec.DecodeError as exc:
        raise invalid("body", f"not valid JSON: {json_reason(body or b'{}', exc)}") from None
    except RecursionError:
        raise invalid("body", "nested too deeply") from None


def check_name(path: str, name: str) -> None:
    """Refuse an id that is not 1–64 of `A-Za-z0-9._-` starting alphanumeric."""
    if not NAME_RE.fullmatch(name):
        raise invalid(path, "must be 1-64 characters of A-Z a-z 0-9 . _ - starting with a letter or digit")


LATEST_S = 253402300799.0
"""9999-12-31T23:59:59Z: the latest time a key may expire (every later one cannot be written as a date)."""
MAX_TTL_S = 100 * 365 * 86400.0
"""The longest `ttl_s` a key may be given: 100 years (for no expiry, send none)."""


def parse_when(value: str | float | None, path: str) -> float | None:
    """An ISO-8601 (no zone = UTC) or epoch-seconds time as epoch seconds; None stays None.

    Raises:
        AdminError: 400 naming `path` when the value is not a time, or lies
            outside 1970-01-01 .. 9999-12-31 (UTC).
    """
    if value is None:
        return None
    if isinstance(value, (int, float)):
        when = float(value)
    else:
        try:
            when = float(value)
        except ValueError:
            try:
                parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
            except ValueError:
                raise invalid(path, "must be ISO-8601 (2025-06-01T12:00:00Z) or epoch seconds") from None
            when = (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
    if not 0.0 <= when <= LATEST_S:  # also refuses NaN
        raise invalid(path, "must be a time between 1970-01-01 and 9999-12-31 (UTC)")
    return when


def settings_patch(current: ScopeSettings, body: bytes, path: str) -> ScopeSettings:
    """`PATCH` semantics: fields sent replace, `null` means *inherit*, others unchanged."""
    patch = decode(body, dict[str, Any], path)
    merged: dict[str, Any] = msgspec.to_builtins(current)
    for name, value in patch.items():
        if name not in SETTING_NAMES:
            close = difflib.get_close_matches(str(name), SETTING_NAMES, n=1, cutoff=0.75)
            hint = f"did you mean `{close[0]}`?" if close else f"known: {', '.join(SETTING_NAMES)}"
            raise invalid(f"{path}.{name}", f"unknown setting ({hint})")
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    return decode(msgspec.json.encode(merged), ScopeSettings, path)


def _api(now_s: float) -> Meta:
    return Meta(origin="api", updated_s=now_s)


def _untombstone(doc: OrgDoc, path: str) -> tuple[str, ...]:
    return tuple(t for t in doc.tombstones if t != path)


def with_settings(doc: OrgDoc, scope: tuple[str, str | None], settings: ScopeSettings, now_s: float) -> OrgDoc:
    """`doc` with one scope's settings replaced: scope `("org", None)`, `("squad", name)` or `("key", name)`."""
    kind, name = scope
    if kind == "org":
        return msgspec.structs.replace(doc, settings=settings, settings_meta=_api(now_s))
    if kind == "squad" and name in doc.squads:
        squad = doc.squads[name]
        return msgspec.structs.replace(
            doc, squads={**doc.squads, name: msgspec.structs.replace(squad, settings=settings, meta=_api(now_s))}
        )
    if kind == "key" and name in doc.keys:
        key = doc.keys[name]
        return msgspec.structs.replace(
            doc, keys={**doc.keys, name: msgspec.structs.replace(key, settings=settings, meta=_api(now_s))}
        )
    raise not_found()


def scope_settings(doc: OrgDoc, scope: tuple[str, str | None]) -> ScopeSettings:
    """One scope's settings (404 when the squad or key does not exist)."""
    kind, name = scope
    if kind == "org":
        return doc.settings
    table: dict[str, Any] = doc.squads if kind == "squad" else doc.keys
    if name not in table:
        raise not_found()
    settings: ScopeSettings = table[name].settings
    return settings


def add_squad(doc: OrgDoc, body: SquadCreate, now_s: float) -> OrgDoc:
    """`doc` with a new squad (409 when the name is taken)."""
    check_name("name", body.name)
    if body.name in doc.squads:
        raise AdminError(409, f"squad {body.name!r} already exists", code="conflict", param="name")
    return msgspec.structs.replace(
        doc,
        squads={**doc.squads, body.name: SquadDoc(settings=body.settings, meta=_api(now_s))},
        tombstones=_untombstone(doc, f"squads.{body.name}"),
    )


def remove_squad(doc: OrgDoc, name: str) -> OrgDoc:
    """`doc` without the squad (409 while keys belong to it)."""
    if name not in doc.squads:
        raise not_found()
    members = sorted(k.name for k in doc.keys.values() if k.squad == name)
    if members:
        raise AdminError(
            409,
            f"squad {name!r} still has keys: {', '.join(members)}; move or delete them first",
            code="conflict",
            param=f"keys.{members[0]}.squad",
        )
    squads = {k: v for k, v in doc.squads.items() if k != name}
    return msgspec.structs.replace(doc, squads=squads, tombstones=(*doc.tombstones, f"squads.{name}"))


def add_key(doc: OrgDoc, body: KeyCreate, token: str, now_s: float) -> tuple[OrgDoc, KeyDoc]:
    """`doc` with a new gateway key for `token` (stored hashed) and the key's record."""
    check_name("name", body.name)
    if body.name in doc.keys:
        raise AdminError(409, f"key {body.name!r} already exists", code="conflict", param="name")
    if body.expires_at is not None and body.ttl_s is not None:
        raise invalid("expires_at", "give `expires_at` or `ttl_s`, not both")
    if body.ttl_s is not None and not 0 < body.ttl_s <= MAX_TTL_S:  # also refuses NaN and infinity
        raise invalid("ttl_s", f"must be positive and at most {MAX_TTL_S:.0f} s (100 years); send none for no expiry")
    expires_s = now_s + body.ttl_s if body.ttl_s is not None else parse_when(body.expires_at, "expires_at")
    if expires_s is not None and expires_s <= now_s:
        raise invalid("expires_at", "is in the past")
    key = KeyDoc(
        name=body.name,
        digest=hash_token(token),
        prefix=lookup_prefix(token),
        squad=body.squad,
        admin=body.admin,
        settings=body.settings,
        created_s=now_s,
        expires_s=expires_s,
        meta=_api(now_s),
    )
    new = msgspec.structs.replace(
        doc, keys={**doc.keys, body.name: key}, tombstones=_untombstone(doc, f"keys.{body.name}")
    )
    return new, key


def patch_key(doc: OrgDoc, name: str, body: KeyPatch, now_s: float) -> OrgDoc:
    """`doc` with a key's squad, admin flag or expiry changed (`expires_at` null: no expiry).

    Raises:
        AdminError: 404 for a key the org does not have; 400 for an `expires_at` in the past
            (refused as at creation, `create_key`).
    """
    key = doc.keys.get(name)
    if key is None:
        raise not_found()
    changes: dict[str, Any] = {"meta": _api(now_s)}
    if body.squad is not UNSET:
        changes["squad"] = body.squad
    if body.admin is not UNSET:
        changes["admin"] = body.admin
    if body.expires_at is not UNSET:
        expires_s = parse_when(body.expires_at, "expires_at")
        if expires_s is not None and expires_s <= now_s:  # as at creation; ending a key now is a revoke
            raise invalid("expires_at", "is in the past; to end the key now, revoke it (POST .../revoke)")
        changes["expires_s"] = expires_s
    return msgspec.structs.replace(doc, keys={**doc.keys, name: msgspec.structs.replace(key, **changes)})


def revoke_key(doc: OrgDoc, name: str, now_s: float) -> OrgDoc:
    """`doc` with the key revoked (idempotent; the record stays for audit)."""
    key = doc.keys.get(name)
    if key is None:
        raise not_found()
    if key.revoked_s is not None:
        return doc
    revoked = msgspec.structs.replace(key, revoked_s=now_s, meta=_api(now_s))
    return msgspec.structs.replace(doc, keys={**doc.keys, name: revoked})


def remove_key(doc: OrgDoc, name: str) -> OrgDoc:
    """`doc` without the key (the file never re-creates it)."""
    if name not in doc.keys:
        raise not_found()
    keys = {k: v for k, v in doc.keys.items() if k != name}
    return msgspec.structs.replace(doc, keys=keys, tombstones=(*doc.tombstones, f"keys.{name}"))


def put_provider_key(doc: OrgDoc, provider: str, sealed: Sealed, now_s: float) -> OrgDoc:
    """`doc` with the org's key for `provider` set (validated against `providers:` on save)."""
    stored = ProviderKeyDoc(secret=sealed, meta=_api(now_s))
    return msgspec.structs.replace(
        doc,
        provider_keys={**doc.provider_keys, provider: stored},
        tombstones=_untombstone(doc, f"provider_keys.{provider}"),
    )


def remove_provider_key(doc: OrgDoc, provider: str) -> OrgDoc:
    """`doc` without the org's key for `provider`."""
    if provider not in doc.provider_keys:
        raise not_found()
    rest = {k: v for k, v in doc.provider_keys.items() if k != provider}
    return msgspec.structs.replace(doc, provider_keys=rest, tombstones=(*doc.tombstones, f"provider_keys.{provider}"))


def put_endpoint(
    doc: OrgDoc,
    name: str,
    base_url: str,
    sealed: Sealed | None,
    now_s: float,
    *,
    auth: ProviderAuth | None = None,
    headers: dict[str, Sealed] | None = None,
) -> OrgDoc:
    """`doc` with a custom endpoint registered or replaced (base URL checked on save; `auth`
    and the header names checked by the caller, `turnout.core.upstream_auth`)."""
    check_name("id", name)
    stored = EndpointDoc(base_url=base_url, secret=sealed, meta=_api(now_s), auth=auth, headers=headers)
    return msgspec.structs.replace(
        doc,
        custom_endpoints={**doc.custom_endpoints, name: stored},
        tombstones=_untombstone(doc, f"custom_endpoints.{name}"),
    )


def remove_endpoint(doc: OrgDoc, name: str) -> OrgDoc:
    """`doc` without the endpoint (409 while a setting names it)."""
    if name not in doc.custom_endpoints:
        raise not_found()
    used = references(doc, f"custom:{name}:")
    if used:
        raise AdminError(
            409, f"custom endpoint {name!r} is still named by {', '.join(used)}", code="conflict", param=used[0]
        )
    rest = {k: v for k, v in doc.custom_endpoints.items() if k != name}
    return msgspec.structs.replace(doc, custom_endpoints=rest, tombstones=(*doc.tombstones, f"custom_endpoints.{name}"))


def rotate_secrets(doc: OrgDoc, vault: Vault) -> tuple[OrgDoc, int]:
    """`doc` with every sealed secret re-sealed under the vault's newest key, bound to its place
    (a legacy unbound secret is bound where it is stored), and how many."""
    provider_keys = {
        p: msgspec.structs.replace(k, secret=vault.rotate(k.secret, provider_key_binding(doc.id, p)))
        for p, k in doc.provider_keys.items()
    }
    endpoints = {
        n: msgspec.structs.replace(
            e,
            secret=vault.rotate(e.secret, endpoint_binding(doc.id, n)) if e.secret is not None else None,
            headers=None
            if e.headers is None
            else {h: vault.rotate(v, header_binding(doc.id, n, h, endpoint=True)) for h, v in e.headers.items()},
        )
        for n, e in doc.custom_endpoints.items()
    }
    count = len(provider_keys) + sum((e.secret is not None) + len(e.headers or {}) for e in endpoints.values())
    if count == 0:
        return doc, 0
    return msgspec.structs.replace(doc, provider_keys=provider_keys, custom_endpoints=endpoints), count
