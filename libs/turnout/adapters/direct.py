"""A complete JSON exchange sent straight through the upstream client's aiohttp session.

Owns: `send_json`, the non-streaming call's send and read for the shared upstream
client (`make_http_client`) when no instrumentation wraps it. The request is the
one httpx built (`turnout.adapters.prepared`: same URL, headers in the same
order, body); what is skipped is httpx's own machinery around its transport
for one POST: the auth, redirect and hook layers (the client has none of
them), the response's stream wrapper and its chunk-by-chunk read. The session
call is the one `httpx_aiohttp.AiohttpTransport` makes (same arguments, same
timeouts, no redirects, no automatic decompression), under the same exception
mapping, so a failure is the same httpx exception with the same aiohttp cause;
the answer is decoded as httpx decodes it (`Content-Encoding`) and a
`Set-Cookie` still reaches the client's jar.

Why: with every other cost of a queued request cut, httpx's layers over aiohttp
were the largest block left in the worker (bench/README.md, "The upstream call
without httpx's layers"). A client whose transport something instrumented is
left on httpx's path (`direct_transport`); Turnout instruments none (the attempt
span is the call's client span: `turnout.observability.telemetry`).
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

import httpx
from aiohttp import ClientSession, ClientTimeout
from httpx_aiohttp import AiohttpTransport
from httpx_aiohttp.transport import map_aiohttp_exceptions

_TIMEOUTS: dict[tuple[float | None, float | None, float | None], ClientTimeout] = {}
"""aiohttp timeouts per (connect, read, pool) of the httpx `timeout` extension (a handful)."""


def _timeout(extension: dict[str, float | None]) -> ClientTimeout:
    key = (extension.get("connect"), extension.get("read"), extension.get("pool"))
    timeout = _TIMEOUTS.get(key)
    if timeout is None:
        timeout = _TIMEOUTS[key] = ClientTimeout(sock_connect=key[0], sock_read=key[1], connect=key[2])
    return timeout


def _session(transport: AiohttpTransport) -> ClientSession:
    """The transport's session, made as the transport makes it on first use."""
    if not isinstance(transport.client, ClientSession):
        transport.client = transport.get_client()
    return transport.client


async def send_json(
    client: httpx.AsyncClient, transport: AiohttpTransport, request: httpx.Request
) -> tuple[int, httpx.Headers, bytes]:
    """Send `request` (a POST with a body, built for `client`) and read the whole answer.

    Args:
        client: the client `request` was built for (its cookie jar gets what the answer sets).
        transport: the client's own transport (`turnout.adapters.transport.direct_transport`).
        request: the request, as `post_request` builds it.

    Returns:
        (status, headers, body), the body decoded as httpx decodes it.

    Raises:
        What `client.send(request)` raises for the same failure: the httpx exception
        `httpx_aiohttp` maps the aiohttp one to (its `__cause__`), or the aiohttp one
        itself where it maps none. Cancellation propagates; the bound is the caller's.
    """
    extensions = request.extensions
    with map_aiohttp_exceptions():
        async with _session(transport).request(
            method=request.method,
            url=str(request.url),
            headers=request.headers,
            data=request.content or None,
            allow_redirects=False,
            auto_decompress=False,
            compress=False,
            timeout=_timeout(extensions.get("timeout", {})),
            server_hostname=extensions.get("sni_hostname"),
        ) as answer:
            content = await answer.read()
        status, raw = answer.status, answer.raw_headers
    headers = httpx.Headers(raw)
    if "content-encoding" in headers or "set-cookie" in headers or "set-cookie2" in headers:
        response = httpx.Response(status, headers=raw, content=content, request=request)  # decodes as httpx does
        client.cookies.extract_cookies(response)
        return status, response.headers, response.content
    return status, headers, content
