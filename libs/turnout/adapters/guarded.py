"""The SSRF-guarded upstream client for tenant custom endpoints (SPEC §6).

Owns: the connect-time half of the SSRF guard (`turnout.rules.ssrf` holds the
rules). Two checks, so that no path reaches a refused address:

- `GuardTransport` checks every request URL before it leaves (scheme,
  userinfo, names reserved for local networks, IP literals in any encoding):
  aiohttp connects to an IP-literal host without asking the resolver.
- `GuardedResolver` checks every address a host name resolves to, at
  connect time, and refuses the connection when any is refused: the
  addresses checked are exactly the ones aiohttp connects to (no
  time-of-check / time-of-use gap, so DNS rebinding does not get through).

Redirects are never followed (the client sets `follow_redirects=False` and
the aiohttp transport passes `allow_redirects=False`); proxies from the
environment are ignored. A refusal surfaces as `httpx.ConnectError`, which
the adapters map to a CONNECT transport failure like any unreachable host.
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

import errno
import socket
from typing import Any

import aiohttp
import httpx
from aiohttp.abc import AbstractResolver, ResolveResult
from httpx_aiohttp import AiohttpTransport

from turnout.adapters.transport import UpstreamClient
from turnout.rules.ssrf import AllowList, UnsafeURL, check_base_url, refused_addresses

REFUSED = "refused by the SSRF guard"


class GuardedResolver(AbstractResolver):
    """An aiohttp resolver that refuses host names resolving to refused addresses.

    Args:
        allow: the operator's allow-list.
        inner: the resolver doing the lookup (default: aiohttp's default).
    """

    def __init__(self, allow: AllowList, inner: AbstractResolver | None = None) -> None:
        self._allow = allow
        self._inner = inner

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """Resolve `host`; raise `OSError` when any address is refused."""
        if self._inner is None:
            self._inner = aiohttp.DefaultResolver()
        results = await self._inner.resolve(host, port, family)
        reason = refused_addresses(host, [r["host"] for r in results], self._allow)
        if reason is not None:
            raise OSError(errno.EACCES, f"{REFUSED}: {reason}")
        return results

    async def close(self) -> None:
        """Close the inner resolver."""
        if self._inner is not None:
            await self._inner.close()


class GuardTransport(httpx.AsyncBaseTransport):
    """Refuses a request whose URL the SSRF rules refuse, before any connection.

    A request whose `Authorization` is an empty bearer (a custom endpoint
    registered without a key) is sent without the header.

    Args:
        inner: the transport that performs allowed requests.
        allow: the operator's allow-list.
    """

    def __init__(self, inner: httpx.AsyncBaseTransport, allow: AllowList) -> None:
        self._inner = inner
        self._allow = allow

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Check the URL, then delegate."""
        try:
            check_base_url(str(request.url), self._allow)
        except UnsafeURL as exc:
            raise httpx.ConnectError(f"{REFUSED}: {exc}", request=request) from None
        if request.headers.get("authorization", "").strip().lower() == "bearer":
            del request.headers["authorization"]  # an endpoint registered without a key gets no credential at all
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        """Close the inner transport."""
        await self._inner.aclose()


def make_guarded_client(
    *, max_connections: int, allow: AllowList, resolver: AbstractResolver | None = None
) -> httpx.AsyncClient:
    """The upstream client for tenant custom endpoints (one per process).

    Args:
        max_connections: cap of open connections to custom endpoints.
        allow: the operator's allow-list (`AllowList.from_env()`).
        resolver: the lookup under the guard (tests inject one).
    """
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    ssl_context = httpx.create_ssl_context(trust_env=False)

    def session() -> aiohttp.ClientSession:
        connector: Any = aiohttp.TCPConnector(
            resolver=GuardedResolver(allow, resolver),
            limit=max_connections,
            ssl=ssl_context,
            keepalive_timeout=limits.keepalive_expiry,
        )
        return aiohttp.ClientSession(connector=connector, trust_env=False)

    transport = AiohttpTransport(limits=limits, trust_env=False, client=session)
    return UpstreamClient(
        timeout=None,
        follow_redirects=False,
        transport=GuardTransport(transport, allow),
        trust_env=False,
    )
