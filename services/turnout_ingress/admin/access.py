"""Access and write machinery of the tenancy admin API (`turnout_ingress.admin`).

Owns: who an admin caller is (the operator key from `TURNOUT_OPERATOR_KEY`,
or an org's `admin: true` gateway key), keeping an org admin inside its org
(another org's objects answer 404, exactly as missing ones), reading an
org's document from Redis, and applying an edit with compare-and-set: the
edited document is validated whole (`turnout.tenancy.orgs.validate_org`) and either
written atomically or refused naming the offending path (`write`; `write_as` and
`preview_as` for a caller the dashboard's session identified: the same checks, and
the edited document without writing it). Also the
registration-time DNS check of custom endpoint hosts.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from yarl import URL

from turnout.core.scopes import ScopeSettings
from turnout.errors import ConfigError, GatewayUnavailable, RequestRejected
from turnout.rules.ssrf import refused_addresses
from turnout.rules.text import MAX_SECRET_CHARS, refusal
from turnout.state.errors import StateUnavailable
from turnout.state.tenant_store import WriteConflict
from turnout.stored.orgs import OrgDoc
from turnout.tenancy.admin import AdminError, T, decode, invalid, not_found
from turnout.tenancy.identity import Identity
from turnout.tenancy.orgs import clamp_settings, hash_token, validate_org
from turnout.vault import Binding, Sealed, SecretUnreadable, VaultUnavailable
from turnout_ingress.errors import JSON
from turnout_ingress.serving.validation import UNAUTHORIZED, keys_not_loaded

if TYPE_CHECKING:
    from turnout.core.policy import Clamp
    from turnout.tenancy.directory import TenantDirectory

DNS_TIMEOUT_S = 2.0
_json = msgspec.json.Encoder()


class Caller(msgspec.Struct, frozen=True, kw_only=True):
    """Who calls: the operator (`org` None) or an org's admin key (`key`: its name)."""

    org: str | None
    key: str | None = None

    @property
    def operator(self) -> bool:
        """True for the operator key."""
        return self.org is None


def ok(data: Any, status: int = 200) -> Response:
    """A JSON answer."""
    return Response(_json.encode(data), status_code=status, media_type=JSON)


def rejected(exc: AdminError) -> RequestRejected:
    """An `AdminError` as the ingress's `RequestRejected` (OpenAI-format error body)."""
    error_type = {403: "permission_error", 404: "not_found_error", 409: "conflict_error"}.get(
        exc.status_code, "invalid_request_error"
    )
    return RequestRejected(exc.status_code, exc.message, error_type=error_type, code=exc.code, param=exc.param)


class AdminAPI:
    """The admin routes' shared logic over one ingress's tenant directory."""

    def __init__(self, directory: TenantDirectory, operator_key: str | None) -> None:
        self.directory = directory
        self.store = directory.store
        self._operator_key = operator_key.encode("utf-8") if operator_key else None

    def caller(self, request: Request) -> Caller:
        """The caller of `request` (401 for an unknown key, 403 for a non-admin key)."""
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        token = token.strip() if scheme.lower() == "bearer" else request.headers.get("x-api-key", "").strip()
        caller = self.identify(token, on_who=lambda who: setattr(request.state, "audit_who", who))
        if caller.org is not None:  # a later refusal's row names the org and key (`door.DoorRefusals`)
            request.state.org, request.state.key = caller.org, caller.key
        return caller

    def identify(self, token: str, on_who: Callable[[str], None] | None = None) -> Caller:
        """The caller holding the admin key `token` (401 for an unknown key, 403 for a non-admin key).

        `on_who` receives the audit log's `who` (`operator`, `key <org>/<name>`) once the key is known.
        """
        if self._operator_key is not None and token and hmac.compare_digest(token.encode("utf-8"), self._operator_key):
            if on_who is not None:
                on_who("operator")
            return Caller(org=None)
        identity = self.directory.authenticate(token)
        if identity is None:
            if token and not self.directory.loaded:
                raise keys_not_loaded()
            raise UNAUTHORIZED
        return self._admin(identity, on_who)

    @staticmethod
    def _admin(identity: Identity, on_who: Callable[[str], None] | None) -> Caller:
        """The caller of an identified key, if it is an admin key (403 otherwise)."""
        if on_who is not None:
            on_who(f"key {identity.org}/{identity.key}")  # the audit log's `who`
        if not identity.admin:
            raise RequestRejected(
                403, "This route needs an admin key.", error_type="permission_error", code="admin_key_required"
            )
        return Caller(org=identity.org, key=identity.key)

    def held(self, prefix: str, digest: str, on_who: Callable[[str], None] | None = None) -> Caller:
        """The caller holding the admin key whose lookup `prefix` and SHA-256 `digest` a dashboard
        session keeps (prefix `""`: the operator key); 401 / 403 / 503 as `identify`."""
        if not prefix:
            if self._operator_key is None or not hmac.compare_digest(digest, hash_token(self._operator_key.decode())):
                raise UNAUTHORIZED
            if on_who is not None:
                on_who("operator")
            return Caller(org=None)
        identity = self.directory.authenticate_digest(prefix, digest)
        if identity is None:
            raise keys_not_loaded() if not self.directory.loaded else UNAUTHORIZED
        return self._admin(identity, on_who)

    def scope(self, request: Request, org: str) -> Caller:
        """The caller, if it may act on `org` (else 404: another org's data looks missing)."""
        caller = self.caller(request)
        self.within(caller, org)
        return caller

    def operator(self, request: Request) -> Caller:
        """The caller, who must hold the operator key (403 otherwise)."""
        caller = self.caller(request)
        if not caller.operator:
            raise RequestRejected(
                403, "This route needs the operator key.", error_type="permission_error", code="operator_key_required"
            )
        return caller

    async def read(self, request: Request, org: str) -> OrgDoc:
        """The org's document, for a caller allowed to see it (else 404, as for a missing org)."""
        self.scope(request, org)
        try:
            doc, _ = await self.store.load(org)
        except StateUnavailable as exc:
            raise unavailable() from exc
        if doc is None:
            raise rejected(not_found())
        return doc

    async def write(self, request: Request, org: str, edit: Callable[[OrgDoc], tuple[OrgDoc, T]]) -> T:
        """Apply `edit` to the org's document: validated whole, then written atomically, or refused."""
        return await self.write_as(self.scope(request, org), org, edit)

    @staticmethod
    def within(caller: Caller, org: str) -> None:
        """Refuse (404, as for a missing org) a `caller` that may not act on `org`."""
        if not caller.operator and caller.org != org:
            raise rejected(not_found())

    async def write_as(self, caller: Caller, org: str, edit: Callable[[OrgDoc], tuple[OrgDoc, T]]) -> T:
        """`write` for a `caller` already identified (the dashboard's session): the same
        validation and compare-and-set; 404 for another org's caller."""
        self.within(caller, org)
        return await self._update(org, self._checked(edit))

    async def preview_as(
        self, caller: Caller, org: str, edit: Callable[[OrgDoc], tuple[OrgDoc, T]]
    ) -> tuple[OrgDoc, OrgDoc, T]:
        """What `write_as` would write, not written: (the document now, the edited one, the edit's
        result), refused exactly as `write_as` would (`RequestRejected`, `GatewayUnavailable`)."""
        self.within(caller, org)
        try:
            current, _ = await self.store.load(org)
        except StateUnavailable as exc:
            raise unavailable() from exc
        try:
            new, result = self._checked(edit)(current)
        except AdminError as exc:
            raise rejected(exc) from None
        assert new is not None  # `_checked` refuses a missing org
        assert current is not None
        return current, new, result

    def _checked(
        self, edit: Callable[[OrgDoc], tuple[OrgDoc, T]]
    ) -> Callable[[OrgDoc | None], tuple[OrgDoc | None, T]]:
        """`edit` as the store's mutation: 404 for a missing org, the edited document validated whole."""
        config, allow = self.directory.config, self.directory.allow

        def mutate(current: OrgDoc | None) -> tuple[OrgDoc | None, T]:
            if current is None:
                raise not_found()
            new, result = edit(current)
            if new is not current:
                try:
                    validate_org(new, config, allow, previous=current)
                except ConfigError as exc:
                    path = str(exc).split(":", 1)[0]
                    raise AdminError(400, str(exc), code="invalid_value", param=path) from None
            return new, result

        return mutate

    async def _update(
        self, org: str, mutate: Callable[[OrgDoc | None], tuple[OrgDoc | None, T]], delete: bool = False
    ) -> T:
        try:
            _, result, version = await self.store.update(org, mutate, delete=delete)
        except AdminError as exc:
            raise rejected(exc) from None
        except (VaultUnavailable, SecretUnreadable) as exc:
            raise RequestRejected(409, str(exc), error_type="conflict_error", code="secret_key_unavailable") from None
        except (StateUnavailable, WriteConflict) as exc:
            raise unavailable() from exc
        if version is not None:
            try:
                await self.directory.refresh()  # read-your-writes on this ingress; others follow within the bound
            except StateUnavailable:
                pass
        return result


def unavailable() -> GatewayUnavailable:
    """503 while Redis is unreachable."""
    return GatewayUnavailable(
        "The tenancy store is unreachable right now; retry shortly.", retry_after_s=1, code="redis_unavailable"
    )


async def dns_check(base_url: str, api: AdminAPI) -> None:
    """Refuse a host name that resolves to a refused address now (registration-time half of the guard).

    A name that does not resolve (yet) is accepted: the connect-time guard
    checks every address actually used.
    """
    url = URL(base_url)
    host = url.raw_host or ""
    if not host or host.replace(".", "").isdigit() or ":" in host:
        return
    try:
        infos = await asyncio.wait_for(asyncio.get_running_loop().getaddrinfo(host, url.port or 443), DNS_TIMEOUT_S)
    except (OSError, TimeoutError):
        return
    reason = refused_addresses(host, [str(info[4][0]) for info in infos], api.directory.allow)
    if reason is not None:
        raise RequestRejected(400, f"base_url: refused: {reason}", param="base_url", code="invalid_value")


def safe(fn: Callable[[], T]) -> T:
    """`fn()`, an `AdminError` turned into the HTTP refusal."""
    try:
        return fn()
    except AdminError as exc:
        raise rejected(exc) from None


def decode_settings(raw: bytes) -> ScopeSettings:
    """A whole scope's settings from a request body (400 naming the field)."""
    return decode(raw, ScopeSettings, "settings")


def clamped(settings: ScopeSettings, api: AdminAPI, path: str) -> tuple[ScopeSettings, list[Clamp]]:
    """Settings with their policy clamped to the ceilings, and the clamps (SPEC §4)."""
    try:
        return clamp_settings(settings, api.directory.config, path)
    except ConfigError as exc:
        raise rejected(AdminError(400, str(exc), code="invalid_value", param=str(exc).split(":", 1)[0])) from None


def secret_fit(path: str, secret: str) -> None:
    """Refuse (400 naming `path`) an API key unfit for an `Authorization` header (`turnout.rules.text`)."""
    reason = refusal(secret, max_chars=MAX_SECRET_CHARS, visible_ascii=True)
    if reason is not None:
        raise rejected(invalid(path, reason))


def seal(api: AdminAPI, secret: str, binding: Binding) -> Sealed:
    """A secret sealed under the newest key, bound to its place (409 when no TURNOUT_SECRET_KEY is set)."""
    try:
        return api.directory.vault.seal(secret, binding)
    except VaultUnavailable as exc:
        raise RequestRejected(409, str(exc), error_type="conflict_error", code="secret_key_unavailable") from None
