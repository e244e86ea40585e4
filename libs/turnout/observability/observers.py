"""Composing the attempt loop's observers: fan-out, Prometheus, the standard set.

Owns: `Observers` (one `RouteObserver` that calls several, isolating their
failures), the Prometheus observer (attempts, fallbacks, upstream latency in
a `Metrics` registry), the spend observer (each served attempt's cost into
the spend ledger) and `route_observers`, the set every process's router
gets (traces, Prometheus, attempt records, spend).
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from opentelemetry.metrics import Meter
from opentelemetry.trace import Tracer

from turnout.core.spend import scope_fields
from turnout.core.types import FailureKind
from turnout.observability.metrics import model_label
from turnout.observability.telemetry import SpanObserver

if TYPE_CHECKING:
    from turnout.adapters.base import Usage
    from turnout.catalog import CatalogSource
    from turnout.core.loop import AttemptRecord, Dispatch
    from turnout.observability.metrics import Metrics
    from turnout.router import RequestInfo, RouteObserver
    from turnout.state.spend_store import SpendLedger

log = logging.getLogger("turnout.telemetry")


class PrometheusObserver:
    """Counts attempts, fallbacks, upstream latency and served attempts' tokens in a `Metrics`
    registry (their cost is the spend observer's, which prices them)."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def attempt_started(self, info: RequestInfo, dispatch: Dispatch) -> object:
        """See `RouteObserver`."""
        return None

    async def attempt_dispatched(self, handle: object) -> None:
        """See `RouteObserver`."""

    def attempt_ended(self, handle: object, info: RequestInfo, record: AttemptRecord, usage: Usage) -> None:
        """See `RouteObserver`."""
        target, m = record.target, self._metrics
        model = model_label(target.provider, target.catalog_model)  # never a tenant's model name
        m.bounded.child(m.attempts, provider=target.provider, model=model, kind=str(record.kind)).inc()
        m.bounded.child(m.upstream_latency, provider=target.provider, model=model).observe(record.duration_ms / 1000.0)
        if record.kind is not FailureKind.SUCCESS:
            return
        m.count_usage(target.provider, target.catalog_model, info.org, usage.input_tokens, usage.output_tokens)
        if record.is_fallback:
            requested = model_label("", info.requested_model)
            m.bounded.child(m.fallbacks, model=requested).inc()

    def waited(self, info: RequestInfo, delay_s: float, reason: str) -> None:
        """See `RouteObserver`."""


class SpendObserver:
    """Adds each successful attempt's cost (catalog prices, the attempt records'
    `cost_usd`) to the spend ledger of its org, squad and key (SPEC §10), and to
    `metrics.cost` when given (every priced attempt, with or without an org)."""

    def __init__(self, ledger: SpendLedger, catalog: CatalogSource, metrics: Metrics | None = None) -> None:
        self._ledger = ledger
        self._catalog = catalog
        self._metrics = metrics

    def attempt_started(self, info: RequestInfo, dispatch: Dispatch) -> object:
        """See `RouteObserver`."""
        return None

    async def attempt_dispatched(self, handle: object) -> None:
        """See `RouteObserver`."""

    def attempt_ended(self, handle: object, info: RequestInfo, record: AttemptRecord, usage: Usage) -> None:
        """See `RouteObserver`: failed attempts cost nothing."""
        price = self._catalog.current.prices.get(record.target.key)
        if record.kind is not FailureKind.SUCCESS or price is None:
            return
        cost = price.cost_usd(usage.input_tokens, usage.output_tokens)
        if self._metrics is not None:
            self._metrics.count_cost(record.target.provider, record.target.catalog_model, info.org, cost)
        if info.org:
            self._ledger.add(info.org, scope_fields(info.squad, info.key), cost)

    def waited(self, info: RequestInfo, delay_s: float, reason: str) -> None:
        """See `RouteObserver`."""


class Observers:
    """Fans the loop's hooks out to several observers, in order.

    A failing observer is logged and skipped: telemetry never fails a request.
    """

    def __init__(self, *observers: RouteObserver) -> None:
        self._observers = observers

    def attempt_started(self, info: RequestInfo, dispatch: Dispatch) -> object:
        """Returns the tuple of every observer's handle. See `RouteObserver`."""
        handles: list[object] = []
        for observer in self._observers:
            try:
                handles.append(observer.attempt_started(info, dispatch))
            except Exception:
                log.exception("observer %s failed in attempt_started", type(observer).__name__)
                handles.append(None)
        return tuple(handles)

    async def attempt_dispatched(self, handle: object) -> None:
        """See `RouteObserver`; `handle` is what `attempt_started` returned."""
        handles = handle if isinstance(handle, tuple) else (None,) * len(self._observers)
        for observer, own in zip(self._observers, handles):
            try:
                await observer.attempt_dispatched(own)
            except Exception:
                log.exception("observer %s failed in attempt_dispatched", type(observer).__name__)

    def attempt_ended(self, handle: object, info: RequestInfo, record: AttemptRecord, usage: Usage) -> None:
        """See `RouteObserver`; `handle` is what `attempt_started` returned."""
        handles = handle if isinstance(handle, tuple) else (None,) * len(self._observers)
        for observer, own in zip(self._observers, handles):
            try:
                observer.attempt_ended(own, info, record, usage)
            except Exception:
                log.exception("observer %s failed in attempt_ended", type(observer).__name__)

    def waited(self, info: RequestInfo, delay_s: float, reason: str) -> None:
        """See `RouteObserver`."""
        for observer in self._observers:
            try:
                observer.waited(info, delay_s, reason)
            except Exception:
                log.exception("observer %s failed in waited", type(observer).__name__)


def route_observers(
    tracer: Tracer | None,
    catalog: CatalogSource,
    *,
    meter: Meter | None = None,
    metrics: Metrics | None = None,
    records: RouteObserver | None = None,
    spend: RouteObserver | None = None,
) -> Observers:
    """The observers of one process's router: traces, then Prometheus, then records, then spend.

    `tracer` None (tracing off, `Telemetry.tracing`) and `meter` None (no metric
    reader, `Telemetry.metering`): no trace observer at all, so an attempt
    builds no span and computes no GenAI metric.
    """
    observers: list[RouteObserver] = []
    if tracer is not None or meter is not None:
        observers.append(SpanObserver(tracer, catalog, meter))
    if metrics is not None:
        observers.append(PrometheusObserver(metrics))
    if records is not None:
        observers.append(records)
    if spend is not None:
        observers.append(spend)
    return Observers(*observers)
