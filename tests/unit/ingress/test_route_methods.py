"""The methods of the ingress's routes, on the app `create_app` builds (no Redis: nothing here needs it):
a 405's `Allow` lists every method the path takes (RFC 9110 §15.5.6), not only those of the
first route Starlette matched."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts

from turnout.config import parse_config
from turnout.settings import Settings
from turnout_ingress.app import create_app

CONFIG = """
providers:
  p: {kind: openai_compatible, base_url: "http://127.0.0.1:9/v1", api_key: k}
models:
  m: {offers: [{provider: p, model: m}]}
"""
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
"""The methods any route of the ingress takes (TRACE: none does)."""


@pytest.fixture(scope="module")
def app() -> FastAPI:
    config = parse_config(CONFIG, env={})
    return create_app(config, redis_url="redis://127.0.0.1:9", settings=Settings.from_env({}))


async def _ask(app: FastAPI, method: str, path: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        return await client.request(method, path)


def _paths(app: FastAPI) -> Iterator[str]:
    """One concrete path per route template with methods (each `{param}` filled with `x`)."""
    templates = {r.path for r in iter_route_contexts(app.router.routes) if r.methods and r.path}
    for template in sorted(templates):
        yield re.sub(r"\{[^}]*\}", "x", template)


@pytest.mark.parametrize(
    ("path", "allow"),
    [
        ("/admin/v1/orgs", "GET, POST"),
        ("/admin/v1/orgs/acme/keys/ci-bot", "DELETE, GET, PATCH"),
        ("/admin/v1/orgs/acme/settings", "GET, PATCH, PUT"),
        ("/admin/v1/orgs/acme/provider-keys/openai", "DELETE, PUT"),
        ("/admin/v1/catalog/models/gpt-x", "DELETE, PUT"),
        ("/v1/chat/completions", "POST"),
        ("/v1/messages", "POST"),  # its GET, PUT, PATCH and DELETE route only refuses them
        ("/v1/messages/count_tokens", "POST"),
    ],
)
async def test_a_405_allows_every_method_of_the_path(app: FastAPI, path: str, allow: str) -> None:
    response = await _ask(app, "TRACE", path)
    assert response.status_code == 405
    assert response.headers.get_list("allow") == [allow]


async def test_every_path_allows_exactly_the_methods_that_are_not_refused_405(app: FastAPI) -> None:
    """Whatever the route table: a method is in `Allow` if and only if the path does not answer it 405."""
    for path in _paths(app):
        refused = await _ask(app, "TRACE", path)
        assert refused.status_code == 405, path
        listed = set(refused.headers["allow"].split(", "))
        for method in METHODS:
            status = (await _ask(app, method, path)).status_code
            assert (status != 405) == (method in listed), (method, path, status, listed)
