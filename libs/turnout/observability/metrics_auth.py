"""The option to require a bearer token on `/metrics` (#40 item 6): `TURNOUT_METRICS_TOKEN`.

Owns: the token check (constant-time, `Authorization: Bearer <token>`) and
the worker's side port with it (prometheus-client's WSGI app behind the
check, on its threading WSGI server); the ingress's `/metrics` route checks
with `bearer_ok` too. Without a token both answer anyone who reaches them,
as before; Prometheus scrapes with one via `authorization: {credentials: …}`
(README "Metrics").
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app, start_http_server
from prometheus_client.exposition import ThreadingWSGIServer

TOKEN_ENV = "TURNOUT_METRICS_TOKEN"
REFUSAL = (
    b'{"error":{"message":"/metrics needs `Authorization: Bearer <TURNOUT_METRICS_TOKEN>`.",'
    b'"type":"authentication_error","param":null,"code":"invalid_api_key"}}'
)
"""The OpenAI-format body of a refused scrape (the token itself is never echoed)."""


def bearer_ok(header: str, token: str) -> bool:
    """True when the `Authorization` header value `header` carries exactly `token` as a bearer token."""
    scheme, _, value = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode())


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No access log line per scrape."""


def guarded(app: Callable[..., Iterable[bytes]], token: str) -> Callable[..., Iterable[bytes]]:
    """A WSGI app answering 401 (OpenAI-format body) unless the request carries `token`."""

    def check(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if not bearer_ok(environ.get("HTTP_AUTHORIZATION", ""), token):
            start_response(
                "401 Unauthorized",
                [("content-type", "application/json"), ("www-authenticate", 'Bearer realm="metrics"')],
            )
            return [REFUSAL]
        return app(environ, start_response)

    return check


def serve_metrics(host: str, port: int, registry: CollectorRegistry, token: str | None) -> Any:
    """Serve `registry` on `host:port` in a daemon thread; with `token`, only to scrapes that carry it.

    Returns:
        The server (`shutdown()` and `server_close()` stop it).

    Raises:
        OSError: the port cannot be bound.
    """
    if token is None:
        server, _ = start_http_server(port, addr=host, registry=registry)
        return server
    httpd = make_server(host, port, guarded(make_wsgi_app(registry), token), ThreadingWSGIServer, handler_class=_Quiet)
    threading.Thread(target=httpd.serve_forever, name="turnout-metrics", daemon=True).start()
    return httpd
