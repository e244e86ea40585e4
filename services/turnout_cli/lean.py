"""Imports a server process never uses, deferred or left out (issue: Performance, memory).

Owns: two import-time savings, applied at the start of `turnout ingress` and
`turnout worker`, before anything imports httpx or redis:

- `jwt` (PyJWT) is imported by redis-py at module load for a token
  authentication Turnout does not use, and it imports `cryptography`'s
  OpenSSL bindings (~8 MiB a process). It is replaced by a deferred module
  that imports the real one on the first attribute read (never, in
  Turnout). `importlib.util.LazyLoader` cannot serve here: on Python 3.11 the
  import system reads `__spec__` of the module on `import jwt`, which makes a
  lazily loaded module execute at once. (`turnout.tenancy.vault` imports
  `cryptography` itself only once a key is configured or used.)
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

Measured RSS at rest: bench/README.md ("Memory").
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

DEFERRED = ("jwt",)
"""Modules imported at first use instead of at `import` (module doc)."""

ABSENT = ("httpx._main", "watchfiles", "pydantic.v1")
"""Modules a server never uses, marked absent so that their importers take their fallback (module doc)."""


class Deferred(types.ModuleType):
    """A stand-in for a module in `sys.modules` that imports the real module on the first
    attribute read, then forwards every read to it."""

    def __getattr__(self, attr: str) -> Any:  # only attributes the stand-in lacks
        real = sys.modules.get(self.__name__)
        if real is self or real is None:
            sys.modules.pop(self.__name__, None)
            real = importlib.import_module(self.__name__)
        return getattr(real, attr)


def defer_unused_imports() -> None:
    """Defer `DEFERRED` and leave out `ABSENT` (module doc); idempotent, and a module
    already imported is left as it is."""
    for name in DEFERRED:
        sys.modules.setdefault(name, Deferred(name))
    for absent in ABSENT:
        sys.modules.setdefault(absent, None)  # type: ignore[arg-type]
