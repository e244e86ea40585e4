"""Map every httpx exception, once, to a transport failure kind.

Owns: the table from httpx's exception tree (and aiohttp's, underneath) to
`TransportError`, and the shared `httpx.AsyncClient` factory (one per
process: pooling, keep-alive).
Must not import: services, FastAPI, arq.

The client speaks through `httpx_aiohttp.AiohttpTransport`: the httpx API and
its instrumentation stay, while connection pooling is aiohttp's. Measured on
this project's 2-core machine at 50 concurrent requests, httpx's own pool
(httpcore) spent 1.9 ms CPU per request scanning its connections; through
the aiohttp transport, 0.34 ms (bench/README.md).

httpx's tree (the leaves that matter):
    TimeoutException: ConnectTimeout, ReadTimeout, WriteTimeout, PoolTimeout
    NetworkError: ConnectError, ReadError, WriteError, CloseError
    ProtocolError: LocalProtocolError, RemoteProtocolError
    ProxyError, UnsupportedProtocol, DecodingError, TooManyRedirects

Every class of httpx's `HTTPError` tree (with `httpx_sse.SSEError`) and of
aiohttp's `ClientError` tree has a row, except the roots (`httpx.HTTPError`, `RequestError`,
`TransportError`, `aiohttp.ClientError`: raised bare only by third-party
code), whose wording decides; a test walks both trees, so a class added by
an upgrade cannot go unmapped.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport
from httpx_sse import SSEError

from turnout.core.classify import transport_kind_from_message
from turnout.core.types import TransportError

# Most specific class first; the first isinstance match wins.
_TABLE: tuple[tuple[type[BaseException], TransportError], ...] = (
    (httpx.ConnectTimeout, TransportError.CONNECT),  # never connected: unreachable, not slow
    (httpx.PoolTimeout, TransportError.ATTEMPT_TIMEOUT),
    (httpx.TimeoutException, TransportError.ATTEMPT_TIMEOUT),
    (httpx.ConnectError, TransportError.CONNECT),
    (httpx.UnsupportedProtocol, TransportError.CONNECT),
    (httpx.ProxyError, TransportError.CONNECT),
    (httpx.RemoteProtocolError, TransportError.RESET),
    (httpx.ReadError, TransportError.RESET),
    (httpx.WriteError, TransportError.RESET),
    (httpx.CloseError, TransportError.RESET),
    (httpx.NetworkError, TransportError.RESET),
    (httpx.LocalProtocolError, TransportError.PROTOCOL),
    (httpx.ProtocolError, TransportError.PROTOCOL),
    (httpx.HTTPStatusError, TransportError.PROTOCOL),  # statuses are read, never raised: malformed if seen
    (httpx.DecodingError, TransportError.PROTOCOL),
    (httpx.TooManyRedirects, TransportError.PROTOCOL),
    (SSEError, TransportError.PROTOCOL),  # httpx_sse: a stream answered without SSE
    (httpx.InvalidURL, TransportError.CONNECT),
    # aiohttp's own, found as the `__cause__` of the httpx error the transport raises
    (aiohttp.ServerTimeoutError, TransportError.ATTEMPT_TIMEOUT),
    (aiohttp.ClientConnectorError, TransportError.CONNECT),
    (aiohttp.ServerDisconnectedError, TransportError.RESET),
    (aiohttp.ClientOSError, TransportError.RESET),
    (aiohttp.ClientPayloadError, TransportError.RESET),
    (aiohttp.ClientConnectionError, TransportError.RESET),
    (aiohttp.ClientResponseError, TransportError.PROTOCOL),
    (aiohttp.RedirectClientError, TransportError.PROTOCOL),  # redirects are never followed
    (aiohttp.InvalidURL, TransportError.CONNECT),  # as httpx.InvalidURL: the provider cannot be reached
    (aiohttp.NonHttpUrlClientError, TransportError.CONNECT),  # as httpx.UnsupportedProtocol
    (aiohttp.UploadAbortedError, TransportError.RESET),  # as httpx.WriteError
    (TimeoutError, TransportError.ATTEMPT_TIMEOUT),
    (ConnectionRefusedError, TransportError.CONNECT),
    (ConnectionResetError, TransportError.RESET),
)


def kind_of_type(cls: type[BaseException]) -> TransportError | None:
    """The transport failure kind of an exception type (`_TABLE`), or None when no row matches.

    The first row whose class `cls` is a subclass of wins (most specific
    rows first).
    """
    for row, kind in _TABLE:
        if issubclass(cls, row):
            return kind
    return None


def transport_error_of(exc: BaseException) -> TransportError:
    """The transport failure kind of an exception raised while calling upstream.

    Matched on the exception type first (`kind_of_type`; an aiohttp cause,
    being the more precise, wins over the httpx class wrapping it); only an
    exception of no known type is matched on its message wording (SPEC §3),
    and one that matches nothing is a PROTOCOL failure (malformed exchange).
    Never raises.
    """
    cause = exc.__cause__
    if isinstance(cause, aiohttp.ClientError):
        exc = cause
    kind = kind_of_type(type(exc))
    if kind is not None:
        return kind
    return transport_kind_from_message(str(exc)) or TransportError.PROTOCOL


class _SetCookiesOnly(httpx.Cookies):
    """A cookie jar that reads a response only when it sets a cookie.

    httpx hands every response to the jar, which first rebuilds the request's
    URL as a `urllib` request (~20 µs per call); the standard jar takes cookies
    from `Set-Cookie` and `Set-Cookie2` only, so skipping a response without
    either changes nothing.
    """

    def extract_cookies(self, response: httpx.Response) -> None:
        """See `httpx.Cookies.extract_cookies`."""
        if "set-cookie" in response.headers or "set-cookie2" in response.headers:
            super().extract_cookies(response)


class UpstreamClient(httpx.AsyncClient):
    """`httpx.AsyncClient` whose cookie jar is `_SetCookiesOnly` (same cookies kept and sent).

    Args:
        direct: the client's own transport when its complete JSON calls may go
            straight through that transport's session (`direct_transport`); None
            (the default) keeps every call on httpx's path, e.g. behind a guard.
        kwargs: `httpx.AsyncClient`'s.
    """

    def __init__(self, *, direct: AiohttpTransport | None = None, **kwargs: Any) -> None:
        self._jar = _SetCookiesOnly()
        self.direct = direct
        super().__init__(**kwargs)

    @property
    def cookies(self) -> httpx.Cookies:
        """Cookies to send with requests (what providers set)."""
        return self._jar

    @cookies.setter
    def cookies(self, cookies: httpx._types.CookieTypes) -> None:
        self._jar = _SetCookiesOnly(cookies)


def direct_transport(client: httpx.AsyncClient) -> AiohttpTransport | None:
    """The transport whose session `client`'s complete JSON calls use directly, or None.

    None for a client not made with `direct` (only `make_http_client` makes one), and
    for one whose transport was wrapped since (OpenTelemetry's `instrument_client`
    wraps its `handle_async_request` on the instance): its calls then all go through
    httpx, so each has its client span.
    """
    transport = client.direct if isinstance(client, UpstreamClient) else None
    if transport is None or "handle_async_request" in vars(transport):
        return None
    return transport


def make_http_client(*, max_connections: int) -> httpx.AsyncClient:
    """The shared upstream client of one process.

    Args:
        max_connections: cap of open upstream connections. Size it above the
            process's concurrency (a worker's `max_jobs`): a cap below it
            queues attempts behind long generations.

    Redirects are never followed (a provider answering 3xx is malformed) and
    timeouts are set per attempt by the caller, so the client has none. Its
    complete JSON calls skip httpx's layers (`direct_transport`).
    """
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    transport = AiohttpTransport(limits=limits, trust_env=False)
    return UpstreamClient(timeout=None, follow_redirects=False, transport=transport, trust_env=False, direct=transport)
