"""Observability: what a process tells its operator — traces, metrics, logs, attempt records (SPEC §9).

Owns the telemetry wing, one job per module:
- `telemetry`: span names and attribute keys, the spans that cross the
  queue, and the trace observer of the attempt loop;
- `tracing`: the OpenTelemetry providers of one process, from `OTEL_*`;
- `metrics`: the Prometheus metrics of one process;
- `jsonlog`: structured JSON logs with trace and request ids, credentials
  redacted;
- `records`: each attempt's rows (started, then ended or lost) in a bounded
  Redis Stream, written in the background;
- `records_export`: reading them back, one row per attempt, as JSONL or CSV;
- `observers`: the standard set of observers every router gets;
- `after_answer`: a worker's scope in which a plain success's bookkeeping
  (records, metrics, spend, span end, breaker count) waits until the answer
  is delivered.

The names below are re-exported; each module is imported on first use
(PEP 562), so a process that only logs never loads the OpenTelemetry SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnout import lazy_face

if TYPE_CHECKING:
    from turnout.observability.jsonlog import configure_logging as configure_logging
    from turnout.observability.metrics import Metrics as Metrics
    from turnout.observability.observers import Observers as Observers
    from turnout.observability.observers import route_observers as route_observers
    from turnout.observability.records import RecordsObserver as RecordsObserver
    from turnout.observability.records import RecordWriter as RecordWriter
    from turnout.observability.records_export import read_rows as read_rows
    from turnout.observability.telemetry import SpanObserver as SpanObserver
    from turnout.observability.tracing import Telemetry as Telemetry
    from turnout.observability.tracing import setup_tracing as setup_tracing

#: Public name -> the module of this package that defines it.
FACE = {
    "configure_logging": "jsonlog",
    "Metrics": "metrics",
    "Observers": "observers",
    "route_observers": "observers",
    "RecordsObserver": "records",
    "RecordWriter": "records",
    "read_rows": "records_export",
    "SpanObserver": "telemetry",
    "Telemetry": "tracing",
    "setup_tracing": "tracing",
}

if not TYPE_CHECKING:
    __getattr__ = lazy_face(__name__, FACE)
