"""The rest of the Responses surface: stored Responses read back and deleted.

Owns:
- `GET /v1/responses/{id}`: the stored Response object;
- `DELETE /v1/responses/{id}`: `{"id", "object": "response", "deleted": true}`;
- `GET /v1/responses/{id}/input_items`: a list page of its input items
  (`{"object": "list", "data", "first_id", "last_id", "has_more"}`; query `limit` 1 to 100,
  default 20, `order` `desc` (default) or `asc`, `after` an item id).
Each is scoped to the caller's org and gateway key (`turnout.state.response_store`): an
unknown, expired, deleted or another key's or org's id is the same 404 `response_not_found`.
An unreachable store is 503 `redis_unavailable`. `POST /v1/responses` is the front door's
(`turnout_ingress.surfaces.responses.surface`).
Must not import: `turnout_ingress.app`, `turnout_ingress.serving.front_door`.

Source: https://platform.openai.com/docs/api-reference/responses/get, /delete, /input-items.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response

from turnout.errors import GatewayUnavailable, RequestRejected
from turnout.state.errors import StateUnavailable
from turnout.state.response_store import StoredResponse
from turnout_ingress.errors import JSON
from turnout_ingress.serving.validation import authenticate, invalid
from turnout_ingress.surfaces.responses.surface import STORE_UNREACHABLE

if TYPE_CHECKING:
    from turnout_ingress.state import IngressState

MAX_PAGE: Final = 100
"""Most input items on one page (OpenAI reference: `limit` 1 to 100, default 20)."""
DEFAULT_PAGE: Final = 20
_encode = msgspec.json.Encoder()


def not_found(response_id: str) -> RequestRejected:
    """The 404 for a Response the caller may not read (never says whether it exists)."""
    return RequestRejected(404, f"Response with id '{response_id[:200]}' not found.", code="response_not_found")


def page_of(items: list[dict[str, Any]], *, limit: int, order: str, after: str | None) -> dict[str, Any]:
    """One list page of `items` (stored oldest first): `order` `asc` or `desc`, the `limit`
    items following the one whose id is `after` (from the start when None).

    Raises:
        RequestRejected: 400 naming `after` when no item has that id.
    """
    ordered = items if order == "asc" else items[::-1]
    start = 0
    if after is not None:
        ids = [item.get("id") for item in ordered]
        if after not in ids:
            raise invalid(f"`after`: no input item of this response has the id '{after[:200]}'.", "after")
        start = ids.index(after) + 1
    data = ordered[start : start + limit]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": start + limit < len(ordered),
    }


def _query(request: Request) -> tuple[int, str, str | None]:
    """`limit`, `order` and `after` of an input_items request.

    Raises:
        RequestRejected: 400 naming the parameter.
    """
    for name in ("limit", "order", "after"):
        if len(request.query_params.getlist(name)) > 1:  # which one was meant is not known
            raise invalid(f"`{name}` is given {len(request.query_params.getlist(name))} times; give it once.", name)
    raw_limit = request.query_params.get("limit")
    limit = DEFAULT_PAGE
    if raw_limit is not None:
        if not (raw_limit.isascii() and raw_limit.isdigit()) or not 1 <= int(raw_limit) <= MAX_PAGE:
            raise invalid(f"`limit` must be an integer from 1 to {MAX_PAGE}.", "limit")
        limit = int(raw_limit)
    order = request.query_params.get("order", "desc")
    if order not in ("asc", "desc"):
        raise invalid("`order` must be asc or desc.", "order")
    return limit, order, request.query_params.get("after")


def install(app: FastAPI, state: IngressState) -> None:
    """Register the three routes (module doc) on `app`."""

    async def stored(request: Request, response_id: str) -> StoredResponse:
        identity = authenticate(request, state.keyring)
        try:
            found = await state.responses.get(identity.org, identity.key, response_id)
        except StateUnavailable as exc:
            raise GatewayUnavailable(STORE_UNREACHABLE, retry_after_s=1, code="redis_unavailable") from exc
        if found is None:
            raise not_found(response_id)
        return found

    @app.get("/v1/responses/{response_id}")
    async def get_response(request: Request, response_id: str) -> Response:
        found = await stored(request, response_id)
        return Response(_encode.encode(found.response), media_type=JSON)

    @app.delete("/v1/responses/{response_id}")
    async def delete_response(request: Request, response_id: str) -> Response:
        identity = authenticate(request, state.keyring)
        try:
            deleted = await state.responses.delete(identity.org, identity.key, response_id)
        except StateUnavailable as exc:
            raise GatewayUnavailable(STORE_UNREACHABLE, retry_after_s=1, code="redis_unavailable") from exc
        if not deleted:
            raise not_found(response_id)
        return Response(_encode.encode({"id": response_id, "object": "response", "deleted": True}), media_type=JSON)

    @app.get("/v1/responses/{response_id}/input_items")
    async def input_items(request: Request, response_id: str) -> Response:
        found = await stored(request, response_id)
        limit, order, after = _query(request)
        return Response(
            _encode.encode(page_of(found.input_items, limit=limit, order=order, after=after)), media_type=JSON
        )
