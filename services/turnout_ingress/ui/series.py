"""Figures over time for the dashboard's charts: attempt rows into requests, buckets and percentiles.

Owns: the pure part of the at-a-glance view — the attempt rows of a window
(`reader.window_rows`, ended and lost rows only) grouped into requests, the
header's live figures (requests per second, error share, p50/p95 request
latency and time to first token, fallbacks per minute), and per time bucket
the requests by outcome, the latency percentiles and each target's share of
the attempts. No I/O, no clock: every time is passed in (epoch seconds).
Must not import: FastAPI, Redis.

A request's latency here is its first attempt's start to its last attempt's
end (retries, backoff waits and fallbacks included; queue wait before the
first attempt is not in the records). Its outcome is its last attempt's:
`ok` (served by its first attempt), `recovered` (served after a retry or a
fallback) or `failed`.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

import msgspec

from turnout_ingress.ui.figures import Row

WINDOWS: dict[str, float] = {"2m": 120.0, "5m": 300.0, "15m": 900.0, "1h": 3600.0, "6h": 21_600.0, "24h": 86_400.0}
"""The charts' windows: the `window` query parameter's values and their length in seconds."""
DEFAULT_WINDOW = "15m"
BUCKETS = 60
"""Time buckets per chart."""
OUTCOMES = ("ok", "recovered", "failed")
"""A request's outcome in the charts, in stacking order (bottom first)."""


def window_s(value: str | None) -> tuple[str, float]:
    """The `window` query parameter as (name, seconds); `DEFAULT_WINDOW` when absent or unknown."""
    name = value if value in WINDOWS else DEFAULT_WINDOW
    return name, WINDOWS[name]


class Window(msgspec.Struct, frozen=True, kw_only=True):
    """One chart window's attempt rows for a viewer (`glance.read_window`).

    Attributes:
        name / span_s: the window (`WINDOWS`) and its length (s); now_s: its end (epoch s).
        rows: its attempt rows, ended or lost; partial: the read stopped at its limit.
    """

    name: str
    span_s: float
    now_s: float
    rows: list[Row]
    partial: bool


class Req(msgspec.Struct, frozen=True, kw_only=True):
    """One request as the charts count it.

    Attributes:
        start_s / end_s: its first attempt's start and its last attempt's end (epoch s).
        outcome: one of `OUTCOMES`.
        fallback: an attempt of it was on a fallback target.
        ttft_ms: its served stream's time to first token (ms), or None (not a stream, or not served).
        cost_usd: the sum over its attempts.
    """

    start_s: float
    end_s: float
    outcome: str
    fallback: bool
    ttft_ms: float | None
    cost_usd: float

    @property
    def latency_ms(self) -> float:
        """First attempt's start to last attempt's end, in milliseconds (>= 0)."""
        return max(0.0, self.end_s - self.start_s) * 1000.0


def _attempt_order(r: Row) -> tuple[int, int]:
    return (r.run or 1, r.attempt)


def requests(rows: Iterable[Row]) -> list[Req]:
    """The requests of `rows` (attempt rows, any order, ended or lost), oldest first by start.

    A request whose first attempts lie before the rows read is counted from the rows present.
    """
    groups: dict[str, list[Row]] = {}
    for r in rows:
        if (group := groups.get(r.request_id)) is None:
            groups[r.request_id] = [r]
        else:
            group.append(r)
    out: list[Req] = []
    for group in groups.values():
        if len(group) == 1:  # most requests: one attempt
            last = group[0]
            start_s, end_s = last.ts, last.ts + (last.latency_ms or 0.0) / 1000.0
            fallback, cost = last.is_fallback, last.cost_usd or 0.0
        else:
            group.sort(key=_attempt_order)
            last = group[-1]
            start_s = min(r.ts for r in group)
            end_s = max(r.ts + (r.latency_ms or 0.0) / 1000.0 for r in group)
            fallback, cost = any(r.is_fallback for r in group), sum(r.cost_usd or 0.0 for r in group)
        served = last.kind == "success"
        outcome = ("recovered" if len(group) > 1 or last.attempt > 1 else "ok") if served else "failed"
        out.append(
            Req(
                start_s=start_s,
                end_s=end_s,
                outcome=outcome,
                fallback=fallback,
                ttft_ms=last.ttft_ms if served else None,
                cost_usd=cost,
            )
        )
    out.sort(key=lambda q: q.start_s)
    return out


def percentile(values: Sequence[float], p: float) -> float | None:
    """The `p`-th percentile (0 < p <= 100) of `values` by nearest rank; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[rank - 1]


class Glance(msgspec.Struct, frozen=True, kw_only=True):
    """The header's live figures over the last `span_s` seconds.

    Attributes:
        span_s: the seconds they cover.
        requests: requests ended in the span.
        per_s: requests per second.
        error_pct: failed requests, percent of `requests` (None: no request).
        p50_ms / p95_ms: request latency percentiles (None: no request).
        ttft_p50_ms / ttft_p95_ms: time to first token of served streams (None: no stream).
        fallbacks_per_min: requests with a fallback attempt, per minute.
    """

    span_s: float
    requests: int
    per_s: float
    error_pct: float | None
    p50_ms: float | None
    p95_ms: float | None
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    fallbacks_per_min: float


def glance(reqs: Iterable[Req], now_s: float, span_s: float) -> Glance:
    """The live figures of the requests that ended in (`now_s - span_s`, `now_s`] (`span_s` > 0)."""
    recent = [q for q in reqs if now_s - span_s < q.end_s <= now_s]
    latencies = [q.latency_ms for q in recent]
    ttfts = [q.ttft_ms for q in recent if q.ttft_ms is not None]
    failed = sum(1 for q in recent if q.outcome == "failed")
    return Glance(
        span_s=span_s,
        requests=len(recent),
        per_s=len(recent) / span_s,
        error_pct=100.0 * failed / len(recent) if recent else None,
        p50_ms=percentile(latencies, 50),
        p95_ms=percentile(latencies, 95),
        ttft_p50_ms=percentile(ttfts, 50),
        ttft_p95_ms=percentile(ttfts, 95),
        fallbacks_per_min=sum(1 for q in recent if q.fallback) / (span_s / 60.0),
    )


class Buckets(msgspec.Struct, frozen=True, kw_only=True):
    """Per time bucket figures of a window.

    Attributes:
        start_s: the first bucket's start (epoch s); step_s: each bucket's length (s).
        outcomes: per outcome of `OUTCOMES`, requests started in each bucket.
        p50_ms / p95_ms: latency percentiles of the requests started in each bucket (None: none).
        share: per target `provider/model`, its share (0..1) of each bucket's attempts.
        attempts: attempts started in each bucket.
    """

    start_s: float
    step_s: float
    outcomes: dict[str, list[int]]
    p50_ms: list[float | None]
    p95_ms: list[float | None]
    share: dict[str, list[float]]
    attempts: list[int]


def _index(ts: float, start_s: float, step_s: float, n: int) -> int | None:
    i = math.floor((ts - start_s) / step_s)
    return i if 0 <= i < n else None


def buckets(
    rows: Sequence[Row], now_s: float, span_s: float, n: int = BUCKETS, reqs: Sequence[Req] | None = None
) -> Buckets:
    """The window (`now_s - span_s`, `now_s`] cut into `n` buckets: requests by outcome and their
    latency percentiles (by request start), and each target's share of the attempts (by attempt
    start); `reqs`: the requests of `rows` when already made (`requests`)."""
    start_s, step_s = now_s - span_s, span_s / n
    outcomes = {o: [0] * n for o in OUTCOMES}
    latencies: list[list[float]] = [[] for _ in range(n)]
    for q in requests(rows) if reqs is None else reqs:
        i = _index(q.start_s, start_s, step_s, n)
        if i is not None:
            outcomes[q.outcome][i] += 1
            latencies[i].append(q.latency_ms)
    per_target: dict[str, list[int]] = {}
    attempts = [0] * n
    for r in rows:
        i = _index(r.ts, start_s, step_s, n)
        if i is not None:
            per_target.setdefault(f"{r.provider}/{r.served_model}", [0] * n)[i] += 1
            attempts[i] += 1
    share = {
        t: [c / a if a else 0.0 for c, a in zip(counts, attempts, strict=True)] for t, counts in per_target.items()
    }
    return Buckets(
        start_s=start_s,
        step_s=step_s,
        outcomes=outcomes,
        p50_ms=[percentile(v, 50) for v in latencies],
        p95_ms=[percentile(v, 95) for v in latencies],
        share=dict(sorted(share.items())),
        attempts=attempts,
    )


def moved(rows: Iterable[Row]) -> dict[str, list[tuple[str, int]]]:
    """Where the traffic each target did not serve went: per target with a failed attempt, the
    targets that served those requests, with how many, most first."""
    by_request: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        if r.kind != "success" or r.attempt > 1 or r.is_fallback:  # a request of one served attempt moved nothing
            by_request[r.request_id].append(r)
    went: dict[str, Counter[str]] = defaultdict(Counter)
    for group in by_request.values():
        served = [r for r in group if r.kind == "success"]
        if not served:
            continue
        there = f"{served[-1].provider}/{served[-1].served_model}"
        for failed in {f"{r.provider}/{r.served_model}" for r in group if r.kind != "success"} - {there}:
            went[failed][there] += 1
    return {target: counts.most_common() for target, counts in went.items()}
