"""Imports a server process never uses, left out (issue: Performance, memory).

Owns: import-time savings, applied at the start of `turnout ingress` and
`turnout worker`, before anything imports httpx, uvicorn or FastAPI:

- `httpx._main`, httpx's command line client, is imported by `import httpx`
  whenever click, rich and pygments are installed (a development
  environment: ~4 MiB a process); a server never runs it, so it is marked
  absent and httpx keeps its own fallback `main`.
- `watchfiles` is imported by `import uvicorn` for `--reload` (~1.5 MiB);
  Turnout never runs uvicorn with reload, so it is marked absent and
  uvicorn keeps its own fallback (polling file times, unused).
- `pydantic.v1`, pydantic's copy of its first version (~2.2 MiB), is
  imported by FastAPI at the first route with a parameter, only to answer
  "is this a pydantic v1 model?"; marked absent, the import fails and
  FastAPI answers "no" (its own fallback), which is true: Turnout has none.

Not here: redis-py 5.3 imports PyJWT (and through it `cryptography`'s
OpenSSL bindings, ~10 MiB a process) at module load; `pyproject.toml` keeps
redis-py below 5.3 instead, as `turnout.settings` imports redis before any
start-up code can run. (`turnout.vault` imports `cryptography` itself
only once a key is configured or used.)

Measured RSS at rest: bench/README.md ("Memory").
"""

from __future__ import annotations

import sys

ABSENT = ("httpx._main", "watchfiles", "pydantic.v1")
"""Modules a server never uses, marked absent so that their importers take their fallback (module doc)."""


def leave_out_unused_imports() -> None:
    """Leave out `ABSENT` (module doc); idempotent, and a module already imported is left as it is."""
    for absent in ABSENT:
        sys.modules.setdefault(absent, None)  # type: ignore[arg-type]
