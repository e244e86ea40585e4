"""`infra/grafana/turnout.json`: every PromQL expression in it (panel queries and template
variables) names only series Turnout exports, and the dashboard draws what README says it does."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from support.metric_series import observed, sample_names

DASHBOARD = Path(__file__).resolve().parents[3] / "infra" / "grafana" / "turnout.json"
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset"}


def expressions(node: Any) -> Iterator[str]:
    """Every PromQL expression in a dashboard (JSON) node: targets' `expr`, variables' queries."""
    if isinstance(node, dict):
        for key, value in node.items():
            promql = key == "expr" or (key == "query" and str(value).startswith("label_values("))
            if promql and isinstance(value, str):
                yield value
            else:
                yield from expressions(value)
    elif isinstance(node, list):
        for item in node:
            yield from expressions(item)


def series_in(expr: str) -> set[str]:
    """The series names an expression selects: its identifiers that are not a function
    (followed by `(`), a keyword, a label name in a grouping or a matcher, or a Grafana variable."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # range selectors
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    text = re.sub(r"\$\w+", "", text)
    text = re.sub(r"label_values\(\s*([a-zA-Z_:][\w:]*)\s*,\s*\w+\s*\)", r"\1", text)
    names = set()
    for match in re.finditer(r"(?<![\w.])([a-zA-Z_:][\w:]*)\s*(\()?", text):
        name, call = match.group(1), match.group(2)
        if not call and name not in KEYWORDS:
            names.add(name)
    return names


def test_every_query_names_only_series_turnout_exports() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exported = sample_names(observed())
    exprs = list(expressions(dashboard))
    assert len(exprs) >= 20
    for expr in exprs:
        named = series_in(expr)
        assert named, f"no series in {expr!r}"
        assert named <= exported, f"{sorted(named - exported)} in {expr!r} is not exported"


def test_the_parser_sees_a_series_that_is_not_exported() -> None:
    assert series_in('sum by (route) (rate(turnout_requests[5m])) / on (route) x_total{a="b"}') == {
        "turnout_requests",
        "x_total",
    }
    assert series_in("label_values(turnout_cost_usd_total, org)") == {"turnout_cost_usd_total"}


def test_the_dashboard_draws_the_series_readme_promises() -> None:
    text = " ".join(expressions(json.loads(DASHBOARD.read_text())))
    for series in (
        "turnout_requests_total",
        "turnout_http_server_request_duration_seconds_bucket",
        "turnout_gen_ai_server_time_to_first_token_seconds_bucket",
        "turnout_gen_ai_client_token_usage_total",
        "turnout_cost_usd_total",
        "turnout_fallbacks_total",
        "turnout_breaker_state",
        "turnout_queue_depth",
        "turnout_queue_wait_seconds_bucket",
    ):
        assert series in text
