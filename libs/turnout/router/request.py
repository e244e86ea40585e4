"""What one routed request brings and gets back, and the hooks that watch it.

Owns: the request's identity (`RequestInfo`), a health read shipped with a queued job
(`Shipped`), the answer (`RouteResult`, with a committed stream's `Finish`), the telemetry
hooks of the loop (`RouteObserver`, `NullObserver`), and the injected clock and sleep.
`turnout.router` re-exports every name.
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import msgspec

from turnout.adapters.base import Usage
from turnout.core.loop import AttemptRecord, Dispatch
from turnout.core.model_types import Operation
from turnout.core.native import CHAT
from turnout.core.types import FailureKind
from turnout.core.verdict import Served, Verdict
from turnout.state.breaker_store import Loaded


class Clock(Protocol):
    """Monotonic seconds for in-process deadlines."""

    def __call__(self) -> float: ...


Sleep = Callable[[float], Awaitable[None]]


class Shipped(msgspec.Struct, frozen=True):
    """A health read made elsewhere (the ingress, for a queued job) and the store's clock now.

    Attributes:
        loaded: the read (`HealthView.loaded`), with the store's clock at it.
        store_now_s: the store's clock now (epoch seconds), to age the read by.
    """

    loaded: Loaded
    store_now_s: float


class RequestInfo(msgspec.Struct, frozen=True, kw_only=True):
    """Who asked for what: the facts every attempt record and span carries."""

    request_id: str
    org: str = ""
    squad: str | None = None
    key: str = ""
    requested_model: str = ""
    streaming: bool = False
    strategy: str | None = None
    run: int = 1
    """The job's run, from 1: above 1 a re-run after the worker running it died (arq's job try)."""
    deadline_s: float | None = None
    """The client's deadline, epoch seconds of this host's clock (None: unknown)."""
    operation: Operation = "chat"
    """The upstream call asked for (`turnout.core.model_types.Operation`): the request body is its OpenAI form."""


class RouteObserver(Protocol):
    """Telemetry hooks of the loop (traces, attempt records, metrics).

    `attempt_started` returns a handle passed back to `attempt_dispatched`
    (awaited just before the upstream call, unless the request's health view
    is degraded: a durable "attempt started" record reaches its store,
    bounded) and `attempt_ended`; for a committed stream, `attempt_ended`
    comes when the stream ends.
    """

    def attempt_started(self, info: RequestInfo, dispatch: Dispatch) -> object: ...

    async def attempt_dispatched(self, handle: object) -> None: ...

    def attempt_ended(self, handle: object, info: RequestInfo, record: AttemptRecord, usage: Usage) -> None: ...

    def waited(self, info: RequestInfo, delay_s: float, reason: str) -> None: ...


class NullObserver:
    """An observer that records nothing."""

    def attempt_started(self, info: RequestInfo, dispatch: Dispatch) -> object:
        """See `RouteObserver`."""
        return None

    async def attempt_dispatched(self, handle: object) -> None:
        """See `RouteObserver`."""

    def attempt_ended(self, handle: object, info: RequestInfo, record: AttemptRecord, usage: Usage) -> None:
        """See `RouteObserver`."""

    def waited(self, info: RequestInfo, delay_s: float, reason: str) -> None:
        """See `RouteObserver`."""


Finish = Callable[[FailureKind, Usage, str], Awaitable[None]]
"""Ends a committed stream's attempt: (final kind, usage, error text)."""


class RouteResult(msgspec.Struct, frozen=True, kw_only=True):
    """The answer to one request.

    Attributes:
        body: the upstream body on a non-streaming success, else None.
        stream: the committed upstream stream on a streaming success.
        finish: for a committed stream, call once when it ends (records the
            attempt's final outcome with the breaker and the observer).
        verdict: the error answer when not served, else None.
        served: facts for the `x-turnout-*` headers.
        records: every attempt's decision record (a committed stream's
            attempt as of its commit point).
        shape: the surface `body` is in (`AttemptResult.shape`: `chat`, or
            a native call's surface, the provider's body as is).
    """

    body: bytes | None
    verdict: Verdict | None
    served: Served
    records: tuple[AttemptRecord, ...]
    stream: Any = None
    finish: Finish | None = None
    shape: str = CHAT
