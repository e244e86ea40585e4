"""The batch span processor's settings: Turnout's defaults for a gateway, the operator's `OTEL_BSP_*` kept."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import export

from turnout.observability.tracing import batch_settings, setup_tracing

OURS = {"max_queue_size": 8192, "max_export_batch_size": 2048, "schedule_delay_millis": 2000}


@pytest.fixture(autouse=True)
def _no_bsp_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "OTEL_BSP_SCHEDULE_DELAY"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, OURS),
        ({"OTEL_BSP_SCHEDULE_DELAY": "500"}, {**OURS, "schedule_delay_millis": None}),
        ({"OTEL_BSP_MAX_QUEUE_SIZE": "1000"}, {**OURS, "max_queue_size": None, "max_export_batch_size": 1000}),
        ({"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "10000"}, {**OURS, "max_queue_size": 10000, "max_export_batch_size": None}),
        (
            {"OTEL_BSP_MAX_QUEUE_SIZE": "64", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "32", "OTEL_BSP_SCHEDULE_DELAY": "1"},
            dict.fromkeys(OURS),
        ),
    ],
)
def test_ours_unless_the_operator_sets_one_and_never_a_batch_above_the_queue(
    env: dict[str, str], expected: dict[str, int | None]
) -> None:
    assert batch_settings(env) == expected


def test_the_variable_set_in_the_process_environment_counts_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    assert batch_settings({})["schedule_delay_millis"] is None


def test_every_batch_exporter_gets_them(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    made: list[dict[str, Any]] = []

    class Recording(export.BatchSpanProcessor):
        def __init__(self, exporter: Any, **kwargs: Any) -> None:
            made.append(kwargs)
            super().__init__(exporter, **kwargs)

    monkeypatch.setattr(export, "BatchSpanProcessor", Recording)
    telemetry = setup_tracing("turnout-test", env={"TURNOUT_TRACE_FILE": str(tmp_path / "spans.jsonl")})
    telemetry.shutdown()
    assert made == [OURS]
