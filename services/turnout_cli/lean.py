"""Imports a server process never uses, left out (issue: Performance, memory).

Owns: marking httpx's command line client (`httpx._main`) absent at the start
of `turnout ingress` and `turnout worker`, before anything imports httpx.
`import httpx` imports it, with click, rich and pygments, whenever those are
installed (a development environment: ~4 MiB per process); a server never
runs it, and httpx keeps its own fallback `main` when it is absent.

(redis-py imports PyJWT and with it `cryptography` at module load, for a
token authentication Turnout does not use; a lazily loaded `jwt` module does
not survive `import jwt` on Python 3.11, so that cost stays.)
"""

from __future__ import annotations

import sys


def defer_unused_imports() -> None:
    """Leave out httpx's command line client (module doc); idempotent."""
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
