"""Admin routes of an org's custom endpoints: list, read, set (SSRF-checked), delete (SPEC §6 "Custom endpoints")."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from turnout.core.upstream_auth import auth_refusal, headers_refusal
from turnout.rules.ssrf import UnsafeURL, check_base_url
from turnout.stored.orgs import OrgDoc
from turnout.tenancy.admin import EndpointPut, decode, invalid, not_found, put_endpoint, remove_endpoint
from turnout.tenancy.views import endpoint_view
from turnout.vault import endpoint_binding, header_binding
from turnout_ingress.admin.access import dns_check, ok, rejected, seal, secret_fit
from turnout_ingress.admin.deps import ORG, Admin, Doc, OrgAdmin, body, now

router = APIRouter()


@router.get(ORG + "/custom-endpoints")
async def list_endpoints(doc: Doc) -> Response:
    """The org's custom endpoints (keys masked)."""
    return ok({"custom_endpoints": [endpoint_view(n, e) for n, e in doc.custom_endpoints.items()]})


def endpoint_answer(doc: OrgDoc, name: str) -> Response:
    """One custom endpoint's view (404 when missing)."""
    if name not in doc.custom_endpoints:
        raise rejected(not_found())
    return ok({"custom_endpoint": endpoint_view(name, doc.custom_endpoints[name])})


@router.get(ORG + "/custom-endpoints/{name}")
async def get_endpoint(name: str, doc: Doc) -> Response:
    """One custom endpoint's view."""
    return endpoint_answer(doc, name)


@router.put(ORG + "/custom-endpoints/{name}")
async def set_endpoint(request: Request, org: str, name: str, api: Admin, _: OrgAdmin) -> Response:
    """Register or replace a custom endpoint: its base URL passes the SSRF guard, its key is sealed."""
    spec = decode(await body(request), EndpointPut)
    try:
        base_url = check_base_url(spec.base_url, api.directory.allow)
    except UnsafeURL as exc:
        raise rejected(invalid("base_url", f"refused: {exc}")) from None
    await dns_check(base_url, api)
    if spec.api_key is not None:
        secret_fit("api_key", spec.api_key)
    refused = auth_refusal("auth", spec.auth) if spec.auth is not None else None
    if refused is None and spec.headers is not None:
        refused = headers_refusal("headers", spec.headers, spec.auth)
    if refused is not None:
        raise rejected(invalid(refused.param, refused.reason))
    sealed = seal(api, spec.api_key, endpoint_binding(org, name)) if spec.api_key else None
    headers = (
        None
        if spec.headers is None
        else {h: seal(api, v, header_binding(org, name, h, endpoint=True)) for h, v in spec.headers.items()}
    )
    await api.write(
        request,
        org,
        lambda doc: (put_endpoint(doc, name, base_url, sealed, now(), auth=spec.auth, headers=headers), None),
    )
    return endpoint_answer(await api.read(request, org), name)


@router.delete(ORG + "/custom-endpoints/{name}")
async def delete_endpoint(request: Request, org: str, name: str, api: Admin) -> Response:
    """Delete a custom endpoint."""
    await api.write(request, org, lambda doc: (remove_endpoint(doc, name), None))
    return ok({"deleted": name})
