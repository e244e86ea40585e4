"""Structured logs: JSON lines with trace, span and request ids, credentials redacted."""

from __future__ import annotations

import io
import json
import logging

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from turnout.observability.jsonlog import json_handler, redact, request_context, scrub_logs
from turnout.observability.tracing import setup_tracing
from turnout.scrub import Scrubber


@pytest.fixture
def capture() -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    logger = logging.getLogger("turnout.test-jsonlog")
    logger.handlers = [json_handler("turnout-test", stream)]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger, stream


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_line_carries_service_level_trace_span_and_request_ids(capture: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = capture
    telemetry = setup_tracing("turnout-test", env={}, span_exporters=[InMemorySpanExporter()])
    with telemetry.tracer.start_as_current_span("job") as span, request_context("rid-42"):
        logger.info("served %s", "ok")
    logger.info("outside")
    inside, outside = _lines(stream)
    ctx = span.get_span_context()
    assert inside["message"] == "served ok" and inside["level"] == "INFO" and inside["service"] == "turnout-test"
    assert inside["logger"] == "turnout.test-jsonlog" and str(inside["time"]).endswith("Z")
    assert inside["trace_id"] == format(ctx.trace_id, "032x") and inside["span_id"] == format(ctx.span_id, "016x")
    assert inside["request_id"] == "rid-42"
    assert "trace_id" not in outside and "request_id" not in outside


def test_with_no_span_a_requests_line_carries_its_request_id_as_trace_id(
    capture: tuple[logging.Logger, io.StringIO],
) -> None:
    """Tracing off: no span is current, yet a request's lines still carry a trace id (README)."""
    logger, stream = capture
    rid = "9c1e0b7a5d4f4e2a8b6c3d2e1f0a9b8c"
    with request_context(rid):
        logger.info("served")
    with request_context("not-a-trace-id"):
        logger.info("served")
    shaped, other = _lines(stream)
    assert shaped["trace_id"] == rid and shaped["request_id"] == rid and "span_id" not in shaped
    assert "trace_id" not in other and other["request_id"] == "not-a-trace-id"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Authorization: Bearer tk-live-123456", "tk-live-123456"),
        ("calling with api_key=sk-abcdef", "sk-abcdef"),
        ('{"api-key": "sk-zz99"}', "sk-zz99"),
        ("x-api-key: 'k-123'", "k-123"),
        ("bearer abc.def.ghi", "abc.def.ghi"),
    ],
    ids=["authorization-bearer", "api_key-equals", "json-api-key", "x-api-key", "bare-bearer"],
)
def test_credentials_are_redacted(text: str, secret: str) -> None:
    assert secret not in redact(text)


def test_a_logged_credential_never_reaches_the_line(capture: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = capture
    try:
        raise ValueError("upstream refused token=tk-secret-value")
    except ValueError:
        logger.exception("failed with Authorization: Bearer tk-secret-value")
    assert "tk-secret-value" not in stream.getvalue()


def test_the_scrub_filter_removes_known_keys_and_api_key_provided_texts(
    capture: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = capture
    scrub_logs(Scrubber(["plat-Zq81mXv0Lr5Tn2Wk9Yb3Hc6"]).credentials, logger)
    logger.warning("upstream said: Incorrect API key provided: sk-notknown0123456789abc.")
    logger.warning("breaker OPEN: 401: key %s revoked", "plat-Zq81mXv0Lr5T")  # a fragment, in the args
    try:
        raise RuntimeError("quoted plat-Zq81mXv0Lr5Tn2Wk9Yb3Hc6 back")
    except RuntimeError:
        logger.exception("failed")
    text = stream.getvalue()
    assert "sk-notknown0123456789abc" not in text and "plat-Zq81mXv0" not in text and "Lr5Tn2Wk" not in text
    assert text.count("[redacted]") >= 3 and "Traceback" in text
