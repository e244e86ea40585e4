"""Structured logs: one JSON object per line, with trace and request ids.

Owns: the process's logging setup (stdlib `logging` through
`python-json-logger`), the filter that adds `trace_id` / `span_id` of the
current span and the request id (a context variable set where a request is
known), and the redaction of credentials: by shape in every line
(`turnout.scrub.redact_shapes`: bearer tokens, `name=value` and "API key
provided: …" forms, key formats, URL queries) and, once the process has
built its scrubber, every credential the fleet knows (`ScrubFilter`).
Must not import: services, FastAPI, arq.

A line looks like::

    {"time": "2025-06-01T12:00:00.123Z", "level": "INFO", "logger": "turnout.worker",
     "message": "...", "service": "turnout-worker", "trace_id": "4bf9...", "span_id": "00f0...",
     "request_id": "9c1e..."}
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import IO, Any

from opentelemetry import trace
from pythonjsonlogger.json import JsonFormatter

from turnout.scrub import redact_shapes

REQUEST_ID: ContextVar[str | None] = ContextVar("turnout_request_id", default=None)
"""The request being served by the current task, when known."""


def redact(text: str) -> str:
    """`text` with credentials recognisable by shape replaced (`turnout.scrub.redact_shapes`)."""
    return redact_shapes(text)


@contextlib.contextmanager
def request_context(request_id: str) -> Iterator[None]:
    """Log lines emitted inside carry `request_id`."""
    token = REQUEST_ID.set(request_id)
    try:
        yield
    finally:
        REQUEST_ID.reset(token)


_HEX = frozenset("0123456789abcdef")


def _trace_id_shaped(text: str) -> bool:
    """True for 32 lowercase hex digits, not all zero (a W3C trace id's shape; Turnout's request ids)."""
    return len(text) == 32 and _HEX.issuperset(text) and text.strip("0") != ""


class ContextFilter(logging.Filter):
    """Adds `trace_id`, `span_id` (hex, when a span is current) and `request_id`.

    With no span current (tracing off: the request path starts none) a line
    of a request still carries a `trace_id`: the request id itself, when it
    has a trace id's shape (32 hex digits, as every id the ingress makes), so
    the lines of one request share one id in every process. Computed here,
    per line written, never per request.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Annotate `record`; never drops it."""
        ctx = trace.get_current_span().get_span_context()
        rid = REQUEST_ID.get()
        if ctx.is_valid:
            record.trace_id = format(ctx.trace_id, "032x")
            record.span_id = format(ctx.span_id, "016x")
        elif rid is not None and _trace_id_shaped(rid):
            record.trace_id = rid
        if rid is not None and not hasattr(record, "request_id"):
            record.request_id = rid
        return True


class ScrubFilter(logging.Filter):
    """Passes every line's message and traceback through the process's scrubber.

    Args:
        scrub: `turnout.scrub.Scrubber.credentials` of the process.
    """

    def __init__(self, scrub: Callable[[str], str]) -> None:
        super().__init__()
        self._scrub = scrub

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite `record` scrubbed (the message formatted first); never drops it."""
        message = record.getMessage()
        clean = self._scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        if record.exc_text:
            record.exc_text = self._scrub(record.exc_text)
        return True


def scrub_logs(scrub: Callable[[str], str], logger: logging.Logger | None = None) -> None:
    """Put a `ScrubFilter(scrub)` on every handler of `logger` (default: the root logger),
    in place of an earlier one."""
    for handler in (logger or logging.getLogger()).handlers:
        for old in [f for f in handler.filters if isinstance(f, ScrubFilter)]:
            handler.removeFilter(old)
        handler.addFilter(ScrubFilter(scrub))


class RedactingJsonFormatter(JsonFormatter):
    """JSON formatter that redacts credentials from the message and exception text."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """ISO-8601 UTC with milliseconds (`2025-06-01T12:00:00.123Z`)."""
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"

    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        """Redact string values that may carry a credential."""
        for name in ("message", "exc_info", "stack_info", "exc_text"):
            value = log_data.get(name)
            if isinstance(value, str):
                log_data[name] = redact(value)
        return log_data


def json_handler(service: str, stream: IO[str] | None = None) -> logging.Handler:
    """A stream handler writing JSON lines for `service` (default stream: stderr)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(
        RedactingJsonFormatter(
            "%(asctime)s %(levelname)s %(name)s %(message)s",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            static_fields={"service": service},
        )
    )
    handler.addFilter(ContextFilter())
    return handler


def configure_logging(service: str, *, level: int = logging.WARNING, turnout_level: int = logging.INFO) -> None:
    """Route every logger of the process to one JSON-lines handler on stderr.

    Args:
        service: the `service` field of every line (`turnout-ingress`, ...).
        level: the root level (third-party libraries).
        turnout_level: the level of Turnout's own `turnout.*` loggers.
    """
    logging.basicConfig(level=level, handlers=[json_handler(service)], force=True)
    logging.getLogger("turnout").setLevel(turnout_level)
