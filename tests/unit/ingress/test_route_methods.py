"""The methods of the ingress's routes, on the app `create_app` builds (`support.ingress_app`, in-process):
every `GET` route answers `HEAD` with the `GET`'s status and headers and no content (RFC 9110 §9.3.2);
a 405's `Allow` lists every method the path takes (RFC 9110 §15.5.6), not only those of the
first route Starlette matched."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from starlette.types import Message

from support.ingress_app import KEY, ingress_app

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
"""The methods any route of the ingress takes (TRACE: none does)."""


@pytest.fixture(scope="module")
def app() -> FastAPI:
    return ingress_app()


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
        ("/admin/v1/orgs", "GET, HEAD, POST"),
        ("/admin/v1/orgs/acme/keys/ci-bot", "DELETE, GET, HEAD, PATCH"),
        ("/admin/v1/orgs/acme/settings", "GET, HEAD, PATCH, PUT"),
        ("/admin/v1/orgs/acme/provider-keys/openai", "DELETE, PUT"),
        ("/admin/v1/catalog/models/gpt-x", "DELETE, PUT"),
        ("/v1/chat/completions", "POST"),
        ("/v1/messages", "POST"),  # its GET, PUT, PATCH and DELETE route only refuses them
        ("/v1/messages/count_tokens", "POST"),
        ("/health/liveness", "GET, HEAD"),
        ("/v1/models", "GET, HEAD"),
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


async def _raw(
    app: FastAPI, method: str, path: str, headers: dict[str, str]
) -> tuple[int, list[tuple[str, str]], bytes]:
    """The status, headers (`x-request-id`'s minted value masked) and content bytes the app sends,
    read off its ASGI messages (an HTTP client would drop a `HEAD` answer's content itself)."""
    messages: list[Message] = []
    requested = False

    async def receive() -> Message:
        nonlocal requested
        if requested:
            return {"type": "http.disconnect"}
        requested = True
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        messages.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"gw"), *((k.encode(), v.encode()) for k, v in headers.items())],
        "client": ("127.0.0.1", 50000),
        "server": ("gw", 80),
        "state": {},
    }
    await app(scope, receive, send)
    start = next(m for m in messages if m["type"] == "http.response.start")
    named = sorted((k.decode("latin-1"), v.decode("latin-1")) for k, v in start["headers"])
    masked = [(k, "<minted>" if k == "x-request-id" else v) for k, v in named]
    content = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    return start["status"], masked, content


@pytest.mark.parametrize(
    ("path", "headers", "status"),
    [
        ("/health/liveness", {}, 200),
        ("/v1/models", {"authorization": f"Bearer {KEY}"}, 200),
        ("/v1/models", {"x-api-key": KEY, "anthropic-version": "2023-06-01"}, 200),
        ("/v1/models/m", {"authorization": f"Bearer {KEY}"}, 200),
        ("/v1/models", {}, 401),
        ("/v1/chat/completions", {}, 405),  # HEAD goes where GET does
        ("/no/such/route", {}, 404),
    ],
)
async def test_head_answers_as_get_without_content(
    app: FastAPI, path: str, headers: dict[str, str], status: int
) -> None:
    got_status, got_headers, content = await _raw(app, "GET", path, headers)
    assert got_status == status and content
    assert await _raw(app, "HEAD", path, headers) == (got_status, got_headers, b"")


async def test_every_path_answers_head_as_it_answers_get(app: FastAPI) -> None:
    for path in _paths(app):
        status, headers, _ = await _raw(app, "GET", path, {})
        head = await _raw(app, "HEAD", path, {})
        if path == "/metrics":  # a live exposition: each request moves its duration histogram's sum, so its length
            headers, head = _lengthless(headers), (head[0], _lengthless(head[1]), head[2])
        assert head == (status, headers, b""), path


def _lengthless(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k != "content-length"]
