"""The dashboard's HTML: its templates rendered, its security headers, the way back to the login form.

Owns: the Jinja2 environment of `templates/` (built at the first page shown: an
ingress whose dashboard nobody opens never loads Jinja2, ~2-3 MiB at rest) and its
filters, `page` (a template rendered as an answer with `SECURITY_HEADERS`) and
`to_login` (a redirect to the login form that clears the cookie).
Must not import: the UI's routes.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from starlette.responses import HTMLResponse, RedirectResponse, Response

from turnout.observability.records_export import iso_ts
from turnout_ingress.admin.access import Caller
from turnout_ingress.ui import session

if TYPE_CHECKING:
    import jinja2

HERE = Path(__file__).parent
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; img-src 'self'; style-src 'self'; script-src 'self'; "
    "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


@functools.cache
def _environment() -> jinja2.Environment:
    """The templates' environment, built at the first page shown: an ingress whose dashboard
    nobody opens never loads Jinja2 (~2-3 MiB at rest)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["iso"] = lambda s: iso_ts(float(s))[:-5].replace("T", " ")
    env.filters["usd"] = lambda v: f"${float(v):,.6f}".rstrip("0").rstrip(".") if v else "$0"
    env.filters["ms"] = lambda v: f"{float(v):,.0f} ms" if float(v) >= 10 else f"{float(v):.1f} ms"
    env.filters["q"] = lambda params: urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return env


def page(name: str, caller: Caller | None, status: int = 200, **context: Any) -> HTMLResponse:
    """The template `name` rendered for `caller` (None: nobody logged in) with `context`, answered
    with `status` and `SECURITY_HEADERS`."""
    html = _environment().get_template(name).render(caller=caller, **context)
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


def to_login() -> Response:
    """A redirect (303) to the login form that clears the login cookie."""
    response = RedirectResponse("/ui/login", status_code=303, headers=SECURITY_HEADERS)
    session.log_out(response)
    return response
