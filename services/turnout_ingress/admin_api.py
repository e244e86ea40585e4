"""The tenancy admin API: `/admin/v1/orgs/...` and `/admin/v1/secrets/rotate` (SPEC §6).

Owns: the routes, mapping HTTP onto the edits of `turnout.tenancy.admin`;
who may call and how a write is applied live in `admin_access`. Callers:
the operator key (`TURNOUT_OPERATOR_KEY`: every org; creates and deletes
orgs; rotates secrets) and an org's admin keys (`admin: true`: that org
only; another org's objects answer 404, exactly as missing ones). Reads
come straight from Redis; secrets appear masked (`…a1b2`), a new gateway
key's secret only in the answer that creates it.

    GET    /admin/v1/orgs                              POST /admin/v1/orgs (operator)
    GET    /admin/v1/orgs/{org}                        DELETE /admin/v1/orgs/{org} (operator)
    GET|PUT|PATCH  .../settings   .../squads/{s}/settings   .../keys/{k}/settings
    GET|POST       .../squads     GET|DELETE .../squads/{s}
    GET|POST       .../keys       GET|PATCH|DELETE .../keys/{k}
    POST           .../keys/{k}/revoke                 GET .../keys/{k}/effective
    GET            .../provider-keys                   PUT|DELETE .../provider-keys/{provider}
    GET            .../custom-endpoints                GET|PUT|DELETE .../custom-endpoints/{id}
    GET            .../spend?period=day|month&at=…     the spend ledger (SPEC §10)
    POST   /admin/v1/secrets/rotate (operator)

Every write is recorded in the audit log (`turnout_ingress.audit`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec
from fastapi import FastAPI, Request
from redis.exceptions import RedisError
from starlette.responses import Response

from turnout.core.spend import PERIODS
from turnout.errors import ConfigError
from turnout.tenancy.orgs import OrgDoc, identity_of, new_gateway_key, validate_org
from turnout.tenancy.ssrf import UnsafeURL, check_base_url
from turnout.tenancy.admin import (
    AdminError, EndpointPut, KeyCreate, KeyPatch, OrgCreate, ProviderKeyPut, SquadCreate, add_key, add_squad,
    check_name, clamps_view, decode, endpoint_view, invalid, key_view, not_found, org_view, patch_key,
    provider_key_view, put_endpoint, put_provider_key, remove_endpoint, remove_key, remove_provider_key,
    remove_squad, revoke_key, rotate_secrets, scope_settings, settings_patch, settings_view, with_settings,
)
from turnout_ingress.admin_access import (
    AdminAPI, clamped, decode_settings, dns_check, ok, rejected, safe, seal, secret_fit, unavailable,
)
from turnout_ingress.admin_routes import parse_time
from turnout.tenancy.directory import OPERATOR_KEY_ENV
from turnout.tenancy.vault import endpoint_binding, provider_key_binding
from turnout.state.audit_log import AuditLog
from turnout_ingress import audit
from turnout_ingress.audit import audit_fields
from turnout_ingress.errors import error_response, naming_the_object
from turnout_ingress.validation import read_body

if TYPE_CHECKING:
    from turnout_ingress.app import IngressState

MAX_BODY_BYTES = 256 * 1024
P = "/admin/v1/orgs/{org}"


def install(app: FastAPI, state: "IngressState", env: dict[str, str] | None = None) -> None:
    """Register the admin API on `app` (operator key from `TURNOUT_OPERATOR_KEY`)."""
    api = AdminAPI(state.keyring, (os.environ if env is None else env).get(OPERATOR_KEY_ENV))
    now = time.time

    async def admin_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, AdminError)
        refusal = rejected(exc)
        return error_response(exc.status_code, naming_the_object(refusal.message, refusal.code, request),
                              error_type=refusal.error_type, code=refusal.code, param=refusal.param)

    app.add_exception_handler(AdminError, admin_error)
    audit.install(app, AuditLog(state.redis), api)

    async def body(request: Request) -> bytes:
        raw = await read_body(request, MAX_BODY_BYTES)
        request.state.audit_fields = audit_fields(raw)
        return raw

    @app.get("/admin/v1/orgs")
    async def list_orgs(request: Request) -> Response:
        caller = api.caller(request)
        try:
            ids = sorted(await api.store.org_versions()) if caller.operator else [caller.org or ""]
            docs = await api.store.load_many(ids)
        except (RedisError, OSError) as exc:
            raise unavailable() from exc
        return ok({"orgs": [org_view(doc, now()) for doc, _ in docs.values()]})

    @app.post("/admin/v1/orgs")
    async def create_org(request: Request) -> Response:
        api.operator(request)
        spec = decode(await body(request), OrgCreate)
        check_name("id", spec.id)
        settings, clamps = clamped(spec.settings, api, "settings")
        doc = OrgDoc(id=spec.id, settings=settings, created_s=now())

        def mutate(current: OrgDoc | None) -> tuple[OrgDoc | None, None]:
            if current is not None:
                raise AdminError(409, f"org {spec.id!r} already exists", code="conflict", param="id")
            try:
                validate_org(doc, api.directory.config, api.directory.allow)
            except ConfigError as exc:
                raise AdminError(400, str(exc), code="invalid_value", param=str(exc).split(":", 1)[0]) from None
            return doc, None

        await api._update(spec.id, mutate)
        return ok({"org": org_view(doc, now()), "clamped": clamps_view(clamps)}, 201)

    @app.get(P)
    async def get_org(request: Request, org: str) -> Response:
        return ok({"org": org_view(await api.read(request, org), now())})

    @app.get(P + "/spend")
    async def get_spend(request: Request, org: str) -> Response:
        await api.read(request, org)  # 404 for another org's, as for a missing one
        period = request.query_params.get("period", "month")
        if period not in PERIODS:
            raise AdminError(400, "`period` must be `day` or `month`.", code="invalid_value", param="period")
        at_s = parse_time(request.query_params.get("at"), "at")
        try:
            ledger = await state.obs.spend.read(org, period, now() if at_s is None else at_s)
        except (RedisError, OSError) as exc:
            raise unavailable() from exc
        return ok({"spend": ledger})

    @app.delete(P)
    async def delete_org(request: Request, org: str) -> Response:
        api.operator(request)

        def mutate(current: OrgDoc | None) -> tuple[OrgDoc | None, None]:
            if current is None:
                raise not_found()
            return None, None

        await api._update(org, mutate, delete=True)
        return ok({"deleted": org})

    def settings_routes(path: str, scope_of: Callable[..., tuple[str, str | None]]) -> None:
        @app.get(path)
        async def get_settings(request: Request, org: str, name: str | None = None) -> Response:
            doc = await api.read(request, org)
            return ok(settings_view(safe(lambda: scope_settings(doc, scope_of(name)))))

        async def save(request: Request, org: str, name: str | None, patch: bool) -> Response:
            api.scope(request, org)
            raw = await body(request)
            if not raw.strip():  # an empty PUT must not wipe every setting by mistake
                raise AdminError(400, "The request body is empty; send a JSON object (`{}` to set every setting "
                                 "to inherit).", code="invalid_value", param="body")
            scope = scope_of(name)

            def edit(doc: OrgDoc) -> tuple[OrgDoc, list[Any]]:
                current = scope_settings(doc, scope)
                new = settings_patch(current, raw, "settings") if patch else decode_settings(raw)
                new, clamps = clamped(new, api, "settings")
                return with_settings(doc, scope, new, now()), clamps

            clamps = await api.write(request, org, edit)
            doc = await api.read(request, org)
            return ok({**settings_view(scope_settings(doc, scope)), "clamped": clamps_view(clamps)})

        @app.put(path)
        async def put_settings(request: Request, org: str, name: str | None = None) -> Response:
            return await save(request, org, name, False)

        @app.patch(path)
        async def patch_settings(request: Request, org: str, name: str | None = None) -> Response:
            return await save(request, org, name, True)

    settings_routes(P + "/settings", lambda name=None: ("org", None))
    settings_routes(P + "/squads/{name}/settings", lambda name=None: ("squad", name))
    settings_routes(P + "/keys/{name}/settings", lambda name=None: ("key", name))

    @app.get(P + "/squads")
    async def list_squads(request: Request, org: str) -> Response:
        doc = await api.read(request, org)
        return ok({"squads": [{"name": n, **settings_view(s.settings)} for n, s in doc.squads.items()]})

    @app.post(P + "/squads")
    async def create_squad(request: Request, org: str) -> Response:
        api.scope(request, org)
        spec = decode(await body(request), SquadCreate)
        settings, clamps = clamped(spec.settings, api, "settings")
        spec = msgspec.structs.replace(spec, settings=settings)
        await api.write(request, org, lambda doc: (add_squad(doc, spec, now()), None))
        return ok({"squad": {"name": spec.name, **settings_view(settings)}, "clamped": clamps_view(clamps)}, 201)

    @app.get(P + "/squads/{name}")
    async def get_squad(request: Request, org: str, name: str) -> Response:
        doc = await api.read(request, org)
        if name not in doc.squads:
            raise rejected(not_found())
        members = sorted(k.name for k in doc.keys.values() if k.squad == name)
        return ok({"squad": {"name": name, **settings_view(doc.squads[name].settings), "keys": members}})

    @app.delete(P + "/squads/{name}")
    async def delete_squad(request: Request, org: str, name: str) -> Response:
        await api.write(request, org, lambda doc: (remove_squad(doc, name), None))
        return ok({"deleted": name})

    @app.get(P + "/keys")
    async def list_keys(request: Request, org: str) -> Response:
        doc = await api.read(request, org)
        return ok({"keys": [key_view(k, now()) for k in doc.keys.values()]})

    @app.post(P + "/keys")
    async def create_key(request: Request, org: str) -> Response:
        api.scope(request, org)
        spec = decode(await body(request), KeyCreate)
        settings, clamps = clamped(spec.settings, api, "settings")
        spec = msgspec.structs.replace(spec, settings=settings)
        token = new_gateway_key()
        key = await api.write(request, org, lambda doc: add_key(doc, spec, token, now()))
        return ok({"key": key_view(key, now()), "secret": token, "clamped": clamps_view(clamps),
                    "note": "The secret is shown once; only its hash is stored."}, 201)

    @app.get(P + "/keys/{name}")
    async def get_key(request: Request, org: str, name: str) -> Response:
        doc = await api.read(request, org)
        if name not in doc.keys:
            raise rejected(not_found())
        return ok({"key": key_view(doc.keys[name], now())})

    @app.get(P + "/keys/{name}/effective")
    async def effective(request: Request, org: str, name: str) -> Response:
        doc = await api.read(request, org)
        if name not in doc.keys:
            raise rejected(not_found())
        identity = identity_of(doc, doc.keys[name], api.directory.config)
        limits = [{"scope": s.label, **msgspec.to_builtins(s.limits)} for s in identity.limits]
        return ok({
            "settings": msgspec.to_builtins(identity.settings), "policy": msgspec.to_builtins(identity.policy),
            "limits": limits,
        })

    @app.patch(P + "/keys/{name}")
    async def update_key(request: Request, org: str, name: str) -> Response:
        api.scope(request, org)
        spec = decode(await body(request), KeyPatch)
        await api.write(request, org, lambda doc: (patch_key(doc, name, spec, now()), None))
        return await get_key(request, org, name)

    @app.post(P + "/keys/{name}/revoke")
    async def revoke(request: Request, org: str, name: str) -> Response:
        await api.write(request, org, lambda doc: (revoke_key(doc, name, now()), None))
        return await get_key(request, org, name)

    @app.delete(P + "/keys/{name}")
    async def delete_key(request: Request, org: str, name: str) -> Response:
        await api.write(request, org, lambda doc: (remove_key(doc, name), None))
        return ok({"deleted": name})

    @app.get(P + "/provider-keys")
    async def list_provider_keys(request: Request, org: str) -> Response:
        doc = await api.read(request, org)
        return ok({"provider_keys": [provider_key_view(p, k) for p, k in doc.provider_keys.items()]})

    @app.put(P + "/provider-keys/{provider}")
    async def set_provider_key(request: Request, org: str, provider: str) -> Response:
        api.scope(request, org)
        spec = decode(await body(request), ProviderKeyPut)
        secret_fit("api_key", spec.api_key)
        sealed = seal(api, spec.api_key, provider_key_binding(org, provider))
        await api.write(request, org, lambda doc: (put_provider_key(doc, provider, sealed, now()), None))
        doc = await api.read(request, org)
        return ok({"provider_key": provider_key_view(provider, doc.provider_keys[provider])})

    @app.delete(P + "/provider-keys/{provider}")
    async def delete_provider_key(request: Request, org: str, provider: str) -> Response:
        await api.write(request, org, lambda doc: (remove_provider_key(doc, provider), None))
        return ok({"deleted": provider})

    @app.get(P + "/custom-endpoints")
    async def list_endpoints(request: Request, org: str) -> Response:
        doc = await api.read(request, org)
        return ok({"custom_endpoints": [endpoint_view(n, e) for n, e in doc.custom_endpoints.items()]})

    @app.get(P + "/custom-endpoints/{name}")
    async def get_endpoint(request: Request, org: str, name: str) -> Response:
        doc = await api.read(request, org)
        if name not in doc.custom_endpoints:
            raise rejected(not_found())
        return ok({"custom_endpoint": endpoint_view(name, doc.custom_endpoints[name])})

    @app.put(P + "/custom-endpoints/{name}")
    async def set_endpoint(request: Request, org: str, name: str) -> Response:
        api.scope(request, org)
        spec = decode(await body(request), EndpointPut)
        try:
            base_url = check_base_url(spec.base_url, api.directory.allow)
        except UnsafeURL as exc:
            raise rejected(invalid("base_url", f"refused: {exc}")) from None
        await dns_check(base_url, api)
        if spec.api_key is not None:
            secret_fit("api_key", spec.api_key)
        sealed = seal(api, spec.api_key, endpoint_binding(org, name)) if spec.api_key else None
        await api.write(request, org, lambda doc: (put_endpoint(doc, name, base_url, sealed, now()), None))
        return await get_endpoint(request, org, name)

    @app.delete(P + "/custom-endpoints/{name}")
    async def delete_endpoint(request: Request, org: str, name: str) -> Response:
        await api.write(request, org, lambda doc: (remove_endpoint(doc, name), None))
        return ok({"deleted": name})

    @app.post("/admin/v1/secrets/rotate")
    async def rotate(request: Request) -> Response:
        api.operator(request)
        try:
            orgs = sorted(await api.store.org_versions())
        except (RedisError, OSError) as exc:
            raise unavailable() from exc
        rotated: dict[str, int] = {}
        for org in orgs:
            rotated[org] = await api._update(org, lambda doc: rotate_secrets(doc, api.directory.vault)
                                             if doc is not None else (None, 0))
        return ok({"rotated": rotated, "total": sum(rotated.values())})
