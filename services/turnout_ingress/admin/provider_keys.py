"""Admin routes of an org's own provider keys (BYOK): list (masked), set, delete (SPEC §6)."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, Request
from starlette.responses import Response

from turnout.aws import config_rules as aws_rules
from turnout.errors import ConfigError
from turnout.stored.orgs import OrgDoc
from turnout.tenancy.admin import ProviderKeyPut, decode, invalid, put_provider_key, remove_provider_key
from turnout.tenancy.views import provider_key_view
from turnout.vault import provider_key_binding
from turnout_ingress.admin.access import AdminAPI, ok, rejected, seal, secret_fit
from turnout_ingress.admin.deps import ORG, Admin, Doc, OrgAdmin, body, now

router = APIRouter()


@router.get(ORG + "/provider-keys")
async def list_provider_keys(doc: Doc) -> Response:
    """The org's provider keys, masked to a tail."""
    return ok({"provider_keys": [provider_key_view(p, k) for p, k in doc.provider_keys.items()]})


def provider_key_edit(
    request: Request, api: AdminAPI, org: str, provider: str, raw: bytes
) -> Callable[[OrgDoc], tuple[OrgDoc, None]]:
    """The edit that sets the org's key for `provider` from the JSON body `raw` (`ProviderKeyPut`),
    the secret checked and sealed at once: the one path of the admin API's
    `PUT .../provider-keys/{provider}` and the dashboard's provider key form
    (`turnout_ingress.ui.pages.settings_keys`).

    Raises:
        AdminError: 400 a bad body. RequestRejected: 400 a key unfit for a header or for the
            provider's kind; 409 no `TURNOUT_SECRET_KEY` configured.
    """
    spec = decode(raw, ProviderKeyPut)
    secret_fit("api_key", spec.api_key)
    shared = request.app.state.turnout.catalog.providers.get(provider)
    if shared is not None:  # a bedrock provider's key is its keys' one-secret form
        try:
            aws_rules.check_key("api_key", shared.kind, spec.api_key)
        except ConfigError as exc:
            raise rejected(invalid("api_key", str(exc).split(": ", 1)[1])) from None
    sealed = seal(api, spec.api_key, provider_key_binding(org, provider))
    return lambda doc: (put_provider_key(doc, provider, sealed, now()), None)


def provider_key_removal(provider: str) -> Callable[[OrgDoc], tuple[OrgDoc, None]]:
    """The edit that deletes the org's key for `provider` (the admin API's `DELETE`, the dashboard's remove)."""
    return lambda doc: (remove_provider_key(doc, provider), None)


@router.put(ORG + "/provider-keys/{provider}")
async def set_provider_key(request: Request, org: str, provider: str, api: Admin, _: OrgAdmin) -> Response:
    """Set the org's key for `provider`, sealed at rest (409 when no secret key is configured)."""
    await api.write(request, org, provider_key_edit(request, api, org, provider, await body(request)))
    doc = await api.read(request, org)
    return ok({"provider_key": provider_key_view(provider, doc.provider_keys[provider])})


@router.delete(ORG + "/provider-keys/{provider}")
async def delete_provider_key(request: Request, org: str, provider: str, api: Admin) -> Response:
    """Delete the org's key for `provider`."""
    await api.write(request, org, provider_key_removal(provider))
    return ok({"deleted": provider})
