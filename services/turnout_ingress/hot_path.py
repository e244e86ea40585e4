"""The ingress's hot path: the client surfaces' routes served without the other routes' per-request plumbing.

Owns: `IngressApp`, the ingress's FastAPI app, which serves the `POST` of every client
surface (`HOT_PATHS`: `/v1/chat/completions`, `/v1/messages`, ...; nearly every request) by
calling their endpoints directly, and every other request through FastAPI's whole stack.

What the whole stack does for these routes is done here, the same way:
- the request counter and timer (`turnout_requests_total` by route and status, the
  end-to-end duration and a stream's time to first token: `RouteCounts.answer`, as the
  `RequestCounter` middleware counts);
- the exception handlers (`turnout_ingress.errors`, looked up along the exception's
  classes): a handled exception's response is counted; the `Exception` handler's 500 is
  sent, not counted, and the exception raised again for the server to log, as Starlette's
  `ServerErrorMiddleware` (outside the counter) does; once a response has started, the
  exception goes to the server unhandled.
What it leaves out does nothing for these routes: matching the path against every route,
FastAPI's dependency solving (the endpoints take only the `Request`: checked at start),
the audit middleware (admin writes only), the `HEAD` middleware (`HEAD` only,
`turnout_ingress.guard.methods`), the body-limit wrapper (no limit is set), the
exit stack (no dependency with `yield`) and FastAPI's own telemetry (it acts only with
global OpenTelemetry providers, which Turnout never installs).

With Turnout's tracing on, each hot-path request is served inside its SERVER span
(`turnout_ingress.observability.ServerSpans`; the other routes get theirs from the
instrumented stack). Measured (bench/README.md): the whole stack cost 40-70 µs of CPU
per request for an endpoint that does nothing; calling the endpoint directly, 6-8 µs.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from turnout_ingress.observability import ServerSpans
from turnout_ingress.ops_routes import RouteCounts
from turnout_ingress.surfaces.registry import SURFACES

HOT_PATHS = frozenset(surface.path for surface in SURFACES)
"""The paths nearly every request takes, the client surfaces' (`turnout_ingress.surfaces`): matched
first (Starlette tries routes in order) and served by `IngressApp` directly."""

Endpoint = Callable[[Request], Awaitable[Response]]
Handler = Callable[[Request, Exception], Awaitable[Response]]


class IngressApp(FastAPI):
    """The ingress's FastAPI app, with the hot path (module doc) once `serve_hot` is called."""

    _hot: Mapping[str, Endpoint] = MappingProxyType({})
    _counter: RouteCounts | None = None
    _spans: ServerSpans | None = None

    def serve_hot(self, counter: RouteCounts, spans: ServerSpans | None = None) -> None:
        """Serve `POST` on `HOT_PATHS` directly from now on, counting with `counter`, each request
        inside its SERVER span from `spans` (None: tracing off, no span).

        Call once every route and exception handler is registered.

        Raises:
            TypeError: a hot route takes more than the `Request` (a dependency, a body model).
        """
        hot: dict[str, Endpoint] = {}
        for route in self.router.routes:
            if isinstance(route, APIRoute) and route.path in HOT_PATHS and "POST" in (route.methods or ()):
                plain = not route.dependencies and not route.dependant.dependencies
                if not plain or list(inspect.signature(route.endpoint).parameters) != ["request"]:
                    raise TypeError(f"the hot route {route.path} must take only the request")
                hot.setdefault(route.path, route.endpoint)
        for handler in self.exception_handlers.values():
            if not inspect.iscoroutinefunction(handler):
                raise TypeError(f"exception handler {handler!r} must be async")
        self._hot = hot
        self._counter = counter
        self._spans = spans

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The hot path for `POST` on a hot path, FastAPI otherwise."""
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path") and self._hot:
            endpoint = self._hot.get(scope["path"])
            counter = self._counter
            if endpoint is not None and counter is not None:
                if self._spans is None:
                    await self._serve(endpoint, counter, scope, receive, send)
                else:
                    await self._spans.serve(scope, send, lambda s: self._serve(endpoint, counter, scope, receive, s))
                return
        await super().__call__(scope, receive, send)

    def _handler_of(self, exc: Exception) -> tuple[Handler | None, bool]:
        """The exception handler of `exc` and whether it is the server-error one (`Exception`)."""
        handlers: dict[Any, Handler] = self.exception_handlers  # type: ignore[assignment]
        for cls in type(exc).__mro__:
            if cls is not Exception and cls in handlers:
                return handlers[cls], False
        return handlers.get(500) or handlers.get(Exception), True

    async def _serve(
        self, endpoint: Endpoint, counter: RouteCounts, scope: Scope, receive: Receive, send: Send
    ) -> None:
        scope["app"] = self
        sent = counter.answer(scope["path"], send)  # counted and timed (`RouteCounts`)
        counting_send = sent.send
        request = Request(scope, receive, counting_send)
        try:
            response = await endpoint(request)
            await response(scope, receive, counting_send)
        except Exception as exc:
            if sent.status is not None:
                raise
            handler, server_error = self._handler_of(exc)
            if handler is None:
                raise
            answer = await handler(request, exc)
            if server_error:
                await answer(scope, receive, send)  # not counted, as outside the counter
                raise
            await answer(scope, receive, counting_send)
            exc.__traceback__ = None
        finally:
            sent.close()
