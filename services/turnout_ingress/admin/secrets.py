"""Admin route of secret rotation: `POST /admin/v1/secrets/rotate` (operator; SPEC §6).

Re-seals every org's provider and endpoint keys under the newest
`TURNOUT_SECRET_KEY`, org by org, then the catalog's provider keys
(`turnout_ingress.admin.catalog.rotated`), and answers how many were re-sealed.
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from turnout.state.errors import StateUnavailable
from turnout.tenancy.admin import rotate_secrets
from turnout_ingress.admin.access import ok, unavailable
from turnout_ingress.admin.catalog import Watch
from turnout_ingress.admin.catalog import rotated as catalog_rotated
from turnout_ingress.admin.deps import Admin, Operator

router = APIRouter()


@router.post("/admin/v1/secrets/rotate")
async def rotate(api: Admin, watch: Watch, _: Operator) -> Response:
    """Re-seal every stored secret under the newest key; the count per org, the catalog's, and the total."""
    try:
        orgs = sorted(await api.store.org_versions())
    except StateUnavailable as exc:
        raise unavailable() from exc
    rotated: dict[str, int] = {}
    for org in orgs:
        rotated[org] = await api._update(
            org, lambda doc: rotate_secrets(doc, api.directory.vault) if doc is not None else (None, 0)
        )
    catalog = await catalog_rotated(watch)  # the operator's provider keys
    return ok({"rotated": rotated, "catalog": catalog, "total": sum(rotated.values()) + catalog})
