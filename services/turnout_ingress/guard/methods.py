"""HTTP methods of the ingress's routes: `HEAD` wherever `GET` is served, and the `Allow` of a 405.

Owns:
- `HeadAsGet`, pure ASGI middleware: a `HEAD` request is served as the same request's
  `GET` and answered with that answer's status and headers, without its content
  (RFC 9110 §9.3.2). FastAPI's routes take only the methods they declare, so a `HEAD`
  was otherwise a 405 everywhere (load balancers check health with `HEAD`). The route
  does the `GET`'s work; only the content is dropped.
- `allowed`: the `Allow` header of a 405, "the target resource's currently supported
  methods" (RFC 9110 §15.5.6, §10.2.1): every method of every route on the request's
  path. Starlette's 405 names only the methods of the first route it matched, so a
  path served by one route per method (`GET` and `POST /admin/v1/orgs`) listed one.
- `REFUSAL`: the name of a route that takes methods only to refuse them with a 405 of
  its own (the Anthropic surface's), so those methods are not listed as taken.

None of this runs on the hot path (`turnout_ingress.hot_path`): it serves `POST` only.
Must not import: `turnout_ingress.app`.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi.routing import iter_route_contexts
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send


def route_path(scope: Scope) -> str:
    """The path the router matches: the request's `path` less the app's mount point
    (`root_path`, ASGI HTTP scope) when the path is under it (`/api` of `/api/v1/x`), else the
    path as is."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if not root or not path.startswith(root):
        return path
    rest = path[len(root) :]
    return rest if not rest or rest.startswith("/") else path


REFUSAL = "method_refusal"
"""The route name that keeps a route's methods out of `allowed` (a route that answers them 405)."""


class HeadAsGet:
    """Pure ASGI middleware: `HEAD` answered as `GET` without content (module doc).

    The inner app sees a copy of the scope with `method` `GET` (the server's own scope,
    and so its access log, keep `HEAD`); every `http.response.body` message goes on with
    an empty body, `more_body` unchanged. Other methods pass through untouched.
    """

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self._app(scope, receive, send)
            return

        async def headless(message: Message) -> None:
            if message["type"] == "http.response.body" and message.get("body"):
                message = {**message, "body": b""}
            await send(message)

        await self._app({**scope, "method": "GET"}, receive, headless)


def allowed(routes: Sequence[BaseRoute], scope: Scope) -> str | None:
    """The `Allow` value of a 405 for the request of `scope`, from the app's `routes`.

    The methods, sorted and joined by ", ", of every route whose path template is that of
    the first route matching the request's path (the one Starlette answered 405 with;
    routes of included routers counted where they are included), with `HEAD` wherever
    `GET` is (`HeadAsGet`). Routes named `REFUSAL` and routes without methods (mounts)
    are left out. None when no route with methods matches the path: the 405 came from
    elsewhere (a mount's app) and its own `Allow` stands. RFC 9110 §15.5.6, §10.2.1.
    """
    path = route_path(scope)
    template: str | None = None
    methods: set[str] = set()
    for route in iter_route_contexts(routes):
        if not route.methods or route.name == REFUSAL:
            continue
        if template is None:
            regex = getattr(route, "path_regex", None)
            if regex is None or not regex.match(path):
                continue
            template = route.path
        if route.path == template:
            methods |= route.methods
    if "GET" in methods:
        methods.add("HEAD")
    return ", ".join(sorted(methods)) or None
