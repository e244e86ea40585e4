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
  with how many refusals it stands for, so a flood cannot flood the log; and, given a
  `RowSink`, one stored row per refusal (`RefusalRow`: `refusal_row`, read back by
  `GET /admin/v1/refusals`), whose writer caps the rows of callers not identified
  (`RateCap`, `turnout_ingress.guard.refusal_writer`).
Must not import: `turnout_ingress.app`.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable
from typing import Final, Protocol

import msgspec

from turnout.observability.jsonlog import request_context
from turnout.observability.metrics import Metrics
from turnout_ingress.surfaces.registry import SURFACES

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
ROUTE_LABELS: Final = PUBLIC_ROUTES | frozenset(UNSERVED_FAMILIES) | frozenset(WITH_IDS) | {"admin", "other"}
"""Every label `route_label` gives with the ingress's routes (`PUBLIC_ROUTES`): the closed set."""
CODE_PATTERN = re.compile(r"[a-z0-9_]{1,48}")
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


METHODS: Final = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
"""The methods a row names as sent; any other is stored as `other` (a closed set, as the route label)."""
MAX_KEYS: Final = 4096
"""Most (route, status, code) keys `RateCap` keeps; past it the table starts afresh (the keys are a
closed set far smaller than this, so it happens only if that stops being true)."""


class RateCap:
    """At most `per_s` events per key in each window of one second (a window opens with the first
    event after the last one closed), so over a span of `T` seconds a key passes at most
    `per_s × (⌊T⌋ + 1)` events.

    Pure but for the injected clock (monotonic seconds). Keys: (route label, status, code), a
    closed set (`MAX_KEYS` bounds the table anyway).
    """

    def __init__(self, per_s: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._per_s = per_s
        self._clock = clock
        self._windows: dict[tuple[str, int, str], tuple[float, int]] = {}  # key -> (window start, passed in it)

    def take(self, key: tuple[str, int, str]) -> bool:
        """True when this event passes (its window has room), False when it is only counted."""
        now = self._clock()
        window = self._windows.get(key)
        if window is None or now - window[0] >= 1.0:
            if window is None and len(self._windows) >= MAX_KEYS:
                self._windows.clear()
            self._windows[key] = (now, 1)
            return self._per_s >= 1
        if window[1] >= self._per_s:
            return False
        self._windows[key] = (window[0], window[1] + 1)
        return True


class RefusalRow(msgspec.Struct, frozen=True, kw_only=True):
    """One stored door refusal (README "Door refusals").

    Attributes:
        ts: when it was refused, epoch seconds (3 decimals).
        request_id: the answer's `x-request-id`.
        method: the request's method (`METHODS`, else `other`).
        route: the route label (`route_label`: a closed set, never the raw path).
        status: the HTTP status answered.
        code: the error code answered (`[a-z0-9_]{1,48}`; `none` when the answer had none, `other`
            for anything else).
        org: the caller's org, None when the caller was not identified.
        key: the caller's gateway key name (never its secret), None when not identified.
    """

    ts: float
    request_id: str
    method: str
    route: str
    status: int
    code: str
    org: str | None
    key: str | None


def refusal_row(
    ts: float, request_id: str, method: str, route: str, status: int, code: str, org: str | None, key: str | None
) -> RefusalRow:
    """The row of one refusal (`RefusalRow`); `route` and `code` already labelled (`route_label`, the
    code as counted), `method` folded into `METHODS`, `ts` in epoch seconds."""
    return RefusalRow(
        ts=round(ts, 3),
        request_id=request_id,
        method=method if method in METHODS else "other",
        route=route,
        status=status,
        code=code,
        org=org,
        key=key,
    )


class RowSink(Protocol):
    """Where the stored rows go (`turnout_ingress.guard.refusal_writer.RefusalWriter`)."""

    def add(self, row: RefusalRow) -> None:
        """Take `row` for writing; never blocks nor raises."""


class DoorRefusals:
    """Counts, logs and stores door refusals (module doc); one per ingress process.

    Args:
        metrics: the process's metrics (the counter is registered there).
        served: the served routes' paths (`route_label`).
        admin_prefix: the admin API's prefix.
        sampler: the log line's sampler.
        rows: where stored rows go; None: none stored.
        clock: epoch seconds (a row's `ts`).
    """

    def __init__(
        self,
        metrics: Metrics,
        served: frozenset[str],
        admin_prefix: str,
        sampler: LogSampler,
        rows: RowSink | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._served = served
        self._admin_prefix = admin_prefix
        self._sampler = sampler
        self._rows = rows
        self._clock = clock
        self._counter = metrics.door_refusals

    def refused(
        self,
        path: str,
        status: int,
        code: str | None,
        key: str | None,
        *,
        org: str | None = None,
        method: str = "",
        request_id: str = "",
    ) -> None:
        """Count, (sampled) log and store one refusal of a request for `path` with `status` and `code`;
        `key` / `org`: the caller's key name and org once it was authenticated, else None;
        `method` and `request_id` (the answer's `x-request-id`) go into the stored row; the log line
        (sampled: one per route, status and code at most every so often) carries `request_id` and,
        as every log line of a request, its `trace_id`."""
        route = route_label(path, self._served, self._admin_prefix)
        shown = code if code is not None and CODE_PATTERN.fullmatch(code) else ("none" if code is None else "other")
        self._counter.labels(route=route, status=str(status), code=shown).inc()
        count = self._sampler.take((route, status, shown))
        if count is not None:  # the line carries the request's id, and the trace id it stands for (jsonlog)
            fields = {"route": route, "status": status, "code": shown, "key": key, "refusals": count}
            with request_context(request_id) if request_id else contextlib.nullcontext():
                log.info("door refusal", extra={**fields, "request_id": request_id} if request_id else fields)
        if self._rows is not None:
            self._rows.add(refusal_row(self._clock(), request_id, method, route, status, shown, org, key))
