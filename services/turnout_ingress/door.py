"""What the door refuses, made visible: the route label of any path, and the refusals' count and log.

Owns:
- `route_label`: the `route` label of a request path, from a closed set so a label's
  cardinality stays bounded: a served route's own path; `admin` for the admin API; the
  family path of a well-known provider API route the gateway does not serve (so an
  operator sees that clients call `/v1/images/generations` or `/v1/audio/...`); else `other`;
- `DoorRefusals`: every request refused at the door (400, 401, 404, 405, 409, 413, 414,
  429, 503 before any upstream call) counted in `turnout_door_refusals_total` by route,
  status and code (codes are the gateway's own words, a closed set), and logged as one
  JSON line `door refusal` with the route, status, code and the caller's key when it was
  known (never the key's secret), at most one line per (route, status, code) a second
  with how many refusals it stands for, so a flood cannot flood the log.
Must not import: `turnout_ingress.app`.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Final

from prometheus_client import Counter

from turnout.observability.metrics import Metrics
from turnout_ingress.surfaces import SURFACES

log = logging.getLogger("turnout.ingress.door")

PUBLIC_ROUTES = frozenset(surface.path for surface in SURFACES) | frozenset(
    {
        "/v1/messages/count_tokens",
        "/v1/models",
        "/v1/health/providers",
        "/metrics",
        "/health/liveness",
        "/health/readiness",
    }
)
"""The served routes' paths, each its own `route` label (besides the families below, "admin" and "other" (a closed set: the label's cardinality stays bounded)."""


WITH_IDS: Final = ("/v1/models",)
"""Served routes followed by an id (`/v1/models/{id}`): labelled by the route, not the id."""
UNSERVED_FAMILIES: Final = (
    "/v1/assistants",
    "/v1/audio",
    "/v1/batches",
    "/v1/chatkit",
    "/v1/complete",
    "/v1/containers",
    "/v1/conversations",
    "/v1/evals",
    "/v1/files",
    "/v1/fine_tuning",
    "/v1/images",
    "/v1/messages/batches",
    "/v1/moderations",
    "/v1/organization",
    "/v1/realtime",
    "/v1/rerank",
    "/v1/responses",
    "/v1/threads",
    "/v1/uploads",
    "/v1/vector_stores",
    "/v1/videos",
)
"""Route families of the OpenAI and Anthropic APIs that real clients call: a request for a path
under one (and no served route) is labelled by the family, so the label set stays this list."""
_CODE = re.compile(r"[a-z0-9_]{1,48}")
"""A code as the gateway writes them (`invalid_api_key`); anything else is labelled `other`."""
_LOG_EVERY_S: Final = 1.0


def route_label(path: str, served: frozenset[str], admin_prefix: str) -> str:
    """The `route` label of a request for `path` (module doc).

    Args:
        path: the request's path (decoded, no query).
        served: the paths of the routes the ingress serves (labelled by themselves).
        admin_prefix: the admin API's prefix (`/admin/v1/`).
    """
    if path in served:
        return path
    if path.startswith(admin_prefix):
        return "admin"
    for route in WITH_IDS:
        if path.startswith(route + "/"):
            return route
    for family in UNSERVED_FAMILIES:
        if path == family or path.startswith(family + "/"):
            return family
    return "other"


class LogSampler:
    """At most one log line per key each `every_s` seconds, telling how many events it stands for.

    Pure but for the injected clock (monotonic seconds).
    """

    def __init__(self, every_s: float = _LOG_EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._every_s = every_s
        self._clock = clock
        self._last: dict[tuple[str, int, str], tuple[float, int]] = {}  # key -> (last line's time, folded since)

    def take(self, key: tuple[str, int, str]) -> int | None:
        """The number of events a line now stands for (this one and those folded since the last
        line), or None when this event is folded into the next line. Keys are a closed set
        (route label, status, code), so the table stays bounded."""
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last[0] < self._every_s:
            self._last[key] = (last[0], last[1] + 1)
            return None
        self._last[key] = (now, 0)
        return 1 + (last[1] if last is not None else 0)


class DoorRefusals:
    """Counts and logs door refusals (module doc); one per ingress process."""

    def __init__(self, metrics: Metrics, served: frozenset[str], admin_prefix: str, sampler: LogSampler) -> None:
        self._served = served
        self._admin_prefix = admin_prefix
        self._sampler = sampler
        self._counter = Counter(
            "turnout_door_refusals",
            "Requests refused at the door, before any upstream call",
            ["route", "status", "code"],
            registry=metrics.registry,
        )

    def refused(self, path: str, status: int, code: str | None, key: str | None) -> None:
        """Count and (sampled) log one refusal of a request for `path` with `status` and `code`;
        `key`: the caller's key id when it was authenticated, else None."""
        route = route_label(path, self._served, self._admin_prefix)
        shown = code if code is not None and _CODE.fullmatch(code) else ("none" if code is None else "other")
        self._counter.labels(route=route, status=str(status), code=shown).inc()
        count = self._sampler.take((route, status, shown))
        if count is not None:
            log.info(
                "door refusal",
                extra={"route": route, "status": status, "code": shown, "key": key, "refusals": count},
            )
