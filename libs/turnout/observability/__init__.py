"""Observability: what a process tells its operator — traces, metrics, logs, attempt records (SPEC §9).

Owns the telemetry wing, one job per module:
- `telemetry`: span names and attribute keys, the spans that cross the
  queue, and the trace observer of the attempt loop;
- `tracing`: the OpenTelemetry providers of one process, from `OTEL_*`;
- `exporters`: where a process's spans go, scrubbed;
- `metrics`: the Prometheus metrics of one process;
- `metrics_auth`: who may read them;
- `jsonlog`: structured JSON logs with trace and request ids, credentials
  redacted;
- `records`: each attempt's rows (started, then ended or lost) in a bounded
  Redis Stream, written in the background;
- `records_export`: reading them back, one row per attempt, as JSONL or CSV;
- `observers`: the standard set of observers every router gets.

The wing observes the router (`turnout.router.request`: what it tells an
observer), never the other way round. Names are imported from their modules
(`from turnout.observability.jsonlog import configure_logging`): a process
that only logs never loads the OpenTelemetry SDK.
"""
