"""Admin route of secret rotation: `POST /admin/v1/secrets/rotate` (operator; SPEC §6).

Re-seals every org's provider and endpoint keys under the newest
`TURNOUT_SECRET_KEY`, org by org, and answers how many were re-sealed.
"""

from __future__ import annotations

from fastapi import APIRouter
from redis.exceptions import RedisError
from starlette.responses import Response

from turnout.tenancy.admin import rotate_secrets
from turnout_ingress.admin.access import ok, unavailable
from turnout_ingress.admin.deps import Admin, Operator

router = APIRouter()


@router.post("/admin/v1/secrets/rotate")
async def rotate(api: Admin, _: Operator) -> Response:
    """Re-seal every stored secret under the newest key; the count per org and the total."""
    try:
        orgs = sorted(await api.store.org_versions())
    except (RedisError, OSError) as exc:
        raise unavailable() from exc
    rotated: dict[str, int] = {}
    for org in orgs:
        rotated[org] = await api._update(org, lambda doc: rotate_secrets(doc, api.directory.vault)
                                         if doc is not None else (None, 0))
    return ok({"rotated": rotated, "total": sum(rotated.values())})
