"""Prometheus metrics of one process, built once and passed down.

Owns: the metric names, labels and buckets (SPEC §9), on a registry of its
own (no module-level state), the text exposition, and the bound on labels
(#40 item 6): no tenant-chosen string becomes a label — a custom endpoint's
target is labelled by its provider (`custom:<org>:<endpoint id>`) with model
`other`, a catalog target by its catalog model id (`model_label`,
`target_label`) — and each labelled metric holds at most
`MAX_LABEL_SETS` label sets: past that, every new set is counted under
`other` in each label (`BoundedLabels`), so no traffic grows a process's
memory or its `/metrics` without bound.
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from turnout.core.breaker import BreakerState

BREAKER_STATE_VALUE = {BreakerState.CLOSED: 0, BreakerState.HALF_OPEN: 1, BreakerState.OPEN: 2}
"""Gauge value per breaker state."""

CONTENT_TYPE = CONTENT_TYPE_LATEST

OTHER = "other"
"""The label value of anything not in a closed set, and of every label set past the cap."""
MAX_LABEL_SETS = 1000
"""Label sets one metric may hold; more are counted under `other` (`BoundedLabels`)."""
CUSTOM_PREFIX = "custom:"
NO_ORG = "none"
"""The `org` label of an attempt no org made (the operator key, a dev request)."""

REQUEST_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 120)
"""End-to-end request buckets (s): OpenTelemetry's `http.server.request.duration` advisory
boundaries, then 30, 60 and 120 s for long completions."""
TTFT_BUCKETS_S = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30)
"""Time-to-first-token buckets (s): OpenTelemetry's `gen_ai.server.time_to_first_token`
advisory boundaries, then 30 s."""


def model_label(provider: str, catalog_model: str) -> str:
    """The `model` label of a target: its catalog model id, `other` for a custom endpoint's
    (whose model names are the tenant's)."""
    if provider.startswith(CUSTOM_PREFIX) or catalog_model.startswith(CUSTOM_PREFIX):
        return OTHER
    return catalog_model


def org_label(org: str | None) -> str:
    """The `org` label of an attempt: its org id (operator-created, counted under `BoundedLabels`'s
    cap like every label), `none` when no org made it."""
    return org or NO_ORG


def status_class(status: int) -> str:
    """The `status_class` label of an HTTP status: `2xx`, `4xx`, `5xx`, ..."""
    return f"{status // 100}xx"


def target_label(key: str) -> str:
    """The `target` label of a target key `provider/model`: a custom endpoint's as `provider/other`."""
    provider, _, _ = key.partition("/")
    return f"{provider}/{OTHER}" if provider.startswith(CUSTOM_PREFIX) else key


class BoundedLabels:
    """The children of labelled metrics, at most `cap` label sets per metric (pure; no clock).

    Args:
        cap: label sets one metric may hold; the sets past it share the all-`other` child.
    """

    def __init__(self, cap: int = MAX_LABEL_SETS) -> None:
        self._cap = cap
        self._seen: dict[int, set[tuple[str, ...]]] = {}  # by the metric's id: one registry's metrics live as long

    def child(self, metric: Any, **labels: str) -> Any:
        """`metric.labels(**labels)`, or its all-`other` child once the metric holds `cap` sets."""
        seen = self._seen.setdefault(id(metric), set())
        values = tuple(labels.values())
        if values not in seen:
            if len(seen) >= self._cap:
                return metric.labels(**dict.fromkeys(labels, OTHER))
            seen.add(values)
        return metric.labels(**labels)


class Metrics:
    """The metrics one process exports.

    Attributes:
        requests: requests answered, by route and HTTP status.
        attempts: upstream attempts by provider, model and classified kind.
        fallbacks: requests served by a fallback target, by requested model.
        breaker_state: 0 closed, 1 half-open, 2 open, per target (read from
            the shared store at scrape time, so every process agrees).
        breaker_transitions: transitions this process wrote, by target and
            new state.
        breaker_trips: trips this process wrote, by target, rule (`run`,
            `rate`, `probe`) and whether the target is the only offer of a
            model (`sole`: that model's requests get 503 until the probe).
        platform_key_alarms: attempts whose platform key was rejected or out
            of quota, by target (an operator alarm, never a breaker failure).
        queue_depth: jobs in the queue (queued + running), at scrape time.
        upstream_latency: seconds per attempt, by provider and model.
        in_flight_jobs: jobs this worker is running now.
        queue_wait: seconds from enqueue to a worker starting the job.
        records_dropped: attempt records dropped (buffer full, Redis down).
        responses_not_stored: Responses answered with `store` but not kept, by reason
            (`redis_unavailable`, `too_large`; `turnout_ingress.surfaces.responses.surface`).
        clock_skew: this process's wall clock minus Redis `TIME`, in seconds
            (`turnout.state.clock_check`; positive: ahead).
        door_refusals: requests refused at the door by route, status and code
            (`turnout_ingress.door.DoorRefusals`).
        refusal_rows_dropped: door-refusal rows not stored, by reason (`RefusalWriter`).
        tokens: tokens of served attempts by provider, model, org and `token_type`
            (`input` / `output`): OpenTelemetry's `gen_ai.client.token.usage`, as a counter.
        cost: US dollars of served attempts (catalog prices) by provider, model and org.
        request_duration: seconds from a request's arrival at the ingress to its answer's
            last byte, by route and status class (OpenTelemetry's `http.server.request.duration`).
        time_to_first_token: seconds from a stream's arrival to its first content sent to
            the client, by route and serving provider (`gen_ai.server.time_to_first_token`).

    No series has a `_created` sample (`disable_created_metrics`, process-wide).
    """

    def __init__(self, cap: int = MAX_LABEL_SETS) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus_client's public switch; idempotent
        self.bounded = BoundedLabels(cap)
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("turnout_requests", "Requests answered", ["route", "status"], registry=r)
        self.attempts = Counter("turnout_attempts", "Upstream attempts", ["provider", "model", "kind"], registry=r)
        self.fallbacks = Counter("turnout_fallbacks", "Requests served by a fallback target", ["model"], registry=r)
        self.breaker_state = Gauge(
            "turnout_breaker_state", "Breaker state: 0 closed, 1 half-open, 2 open", ["target"], registry=r
        )
        self.breaker_transitions = Counter(
            "turnout_breaker_transitions", "Breaker transitions written by this process", ["target", "to"], registry=r
        )
        self.breaker_trips = Counter(
            "turnout_breaker_trips", "Breaker trips written by this process", ["target", "rule", "sole"], registry=r
        )
        self.platform_key_alarms = Counter(
            "turnout_platform_key_alarms",
            "Attempts whose platform key was rejected or out of quota",
            ["target"],
            registry=r,
        )
        self.queue_depth = Gauge("turnout_queue_depth", "Jobs queued or running", registry=r)
        self.upstream_latency = Histogram(
            "turnout_upstream_latency_seconds",
            "Duration of one upstream attempt",
            ["provider", "model"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
            registry=r,
        )
        self.in_flight_jobs = Gauge("turnout_in_flight_jobs", "Jobs this worker is running", registry=r)
        self.queue_wait = Histogram(
            "turnout_queue_wait_seconds",
            "Time from enqueue to a worker starting the job",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=r,
        )
        self.records_dropped = Counter("turnout_records_dropped", "Attempt records dropped", registry=r)
        self.audit_unauthenticated = Counter(
            "turnout_audit_unauthenticated_writes",
            "Admin writes refused before a caller was known (counted here, sampled into the audit log)",
            registry=r,
        )
        self.responses_not_stored = Counter(
            "turnout_responses_not_stored",
            "Responses answered but not kept in the conversation store",
            ["reason"],
            registry=r,
        )
        self.clock_skew = Gauge(
            "turnout_clock_skew_seconds", "This process's wall clock minus Redis TIME (positive: ahead)", registry=r
        )
        self._declare_answer_series(r)
        self._declare_usage_series(r)

    def _declare_answer_series(self, r: CollectorRegistry) -> None:
        """The ingress's answer series: door refusals, end-to-end duration, time to first token."""
        self.door_refusals = Counter(
            "turnout_door_refusals",
            "Requests refused at the door, before any upstream call",
            ["route", "status", "code"],
            registry=r,
        )
        self.refusal_rows_dropped = Counter(
            "turnout_refusal_rows_dropped",
            "Door-refusal rows not stored: capped (callers not identified), buffer full, Redis unavailable",
            ["reason"],
            registry=r,
        )
        self.request_duration = Histogram(
            "turnout_http_server_request_duration_seconds",
            "Request arrival to the answer's last byte (http.server.request.duration)",
            ["route", "status_class"],
            buckets=REQUEST_BUCKETS_S,
            registry=r,
        )
        self.time_to_first_token = Histogram(
            "turnout_gen_ai_server_time_to_first_token_seconds",
            "Stream arrival to its first content sent (gen_ai.server.time_to_first_token)",
            ["route", "provider"],
            buckets=TTFT_BUCKETS_S,
            registry=r,
        )

    def _declare_usage_series(self, r: CollectorRegistry) -> None:
        """The served attempts' tokens and cost."""
        self.tokens = Counter(
            "turnout_gen_ai_client_token_usage",
            "Tokens of served attempts (gen_ai.client.token.usage)",
            ["provider", "model", "org", "token_type"],
            registry=r,
        )
        self.cost = Counter(
            "turnout_cost_usd",
            "US dollars of served attempts (catalog prices)",
            ["provider", "model", "org"],
            registry=r,
        )

    def on_transition(self, target: str, before: BreakerState, after: BreakerState) -> None:
        """Breakers hook: count a transition."""
        self.bounded.child(self.breaker_transitions, target=target_label(target), to=str(after)).inc()

    def on_trip(self, target: str, rule: str, sole: bool) -> None:
        """Breakers hook: count a trip."""
        self.bounded.child(self.breaker_trips, target=target_label(target), rule=rule, sole=str(sole).lower()).inc()

    def on_alarm(self, target: str) -> None:
        """Breakers hook: count a platform-key alarm."""
        self.bounded.child(self.platform_key_alarms, target=target_label(target)).inc()

    def count_usage(self, provider: str, catalog_model: str, org: str | None, input_tokens: int, output: int) -> None:
        """Add one served attempt's input and output tokens (bounded labels: `model_label`, `org_label`)."""
        model, org_value = model_label(provider, catalog_model), org_label(org)
        for token_type, n in (("input", input_tokens), ("output", output)):
            labels = {"provider": provider, "model": model, "org": org_value, "token_type": token_type}
            self.bounded.child(self.tokens, **labels).inc(n)

    def count_cost(self, provider: str, catalog_model: str, org: str | None, usd: float) -> None:
        """Add one served attempt's cost in US dollars (bounded labels: `model_label`, `org_label`)."""
        labels = {"provider": provider, "model": model_label(provider, catalog_model), "org": org_label(org)}
        self.bounded.child(self.cost, **labels).inc(usd)

    def exposition(self) -> bytes:
        """The registry in Prometheus text format."""
        return generate_latest(self.registry)
