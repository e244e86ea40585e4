"""A `Metrics` registry with one observation in every labelled series, and its exposition read back."""

from __future__ import annotations

import re

from turnout.core.breaker import BreakerState
from turnout.observability.metrics import Metrics
from turnout_ingress.ops_routes import RouteCounts


def observed() -> Metrics:
    """A registry with one observation in every labelled series."""
    m = Metrics()
    counts = RouteCounts(m)
    counts.count("/v1/chat/completions", 200)
    counts.answered("/v1/chat/completions", 200, 0.25)
    counts.first_token("/v1/chat/completions", "sim-a", 0.05)
    m.attempts.labels(provider="sim-a", model="m", kind="success").inc()
    m.upstream_latency.labels(provider="sim-a", model="m").observe(0.2)
    m.fallbacks.labels(model="m").inc()
    m.count_usage("sim-a", "m", "acme", 7, 5)
    m.count_cost("sim-a", "m", "acme", 0.001)
    m.breaker_state.labels(target="sim-a/m").set(0)
    m.on_transition("sim-a/m", BreakerState.CLOSED, BreakerState.OPEN)
    m.on_trip("sim-a/m", "run", sole=False)
    m.on_alarm("sim-a/m")
    m.door_refusals.labels(route="other", status="404", code="not_found").inc()
    m.refusal_rows_dropped.labels(reason="capped").inc()
    m.responses_not_stored.labels(reason="too_large").inc()
    m.queue_wait.observe(0.01)
    return m


def exported(metrics: Metrics) -> dict[str, tuple[str, frozenset[str]]]:
    """Series name (as in `# TYPE`: counters with `_total`) -> (type, label names) of the exposition."""
    text = metrics.exposition().decode()
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE))
    labels: dict[str, set[str]] = {name: set() for name in types}
    for name, body in re.findall(r"^(turnout_[a-z_]+)\{([^}]*)\}", text, re.MULTILINE):
        family = name if name in types else re.sub(r"_(bucket|sum|count)$", "", name)
        labels[family] |= set(re.findall(r'([a-z_]+)="', body)) - {"le"}
    return {name: (kind, frozenset(labels[name])) for name, kind in types.items()}


def sample_names(metrics: Metrics) -> frozenset[str]:
    """Every sample name of the exposition (`_total`, `_bucket`, `_sum`, `_count` included)."""
    text = metrics.exposition().decode()
    return frozenset(re.findall(r"^(turnout_[a-z_]+)[{ ]", text, re.MULTILINE))
