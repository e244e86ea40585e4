"""The arithmetic of the scale-out bench (`scale.py`): counters of one measured window -> figures per request.

Pure: no processes, no sockets. A `Window` holds the deltas over one measured
run (the load generator's counts, CPU seconds per role from `/proc/PID/stat`
utime + stime, Redis's `INFO cpu` used_cpu_user + used_cpu_sys, Redis's
`INFO commandstats` calls per command); `per_request` turns one into figures,
`summarize` takes the medians over the reps of one worker count, and
`format_table` prints the rows. An idle window (no requests) gives each
role's own CPU rate (a worker's heartbeat, scans, lease renewal): the
figures "net of idle" take that rate times the window's length out, so a
fixed cost per process does not read as a cost per request.

The fleet ceiling per Redis is a projection, not a measurement: if Redis's CPU
per request stays what it was here, one Redis core (Redis runs commands on one
thread) serves at most 1000 / (Redis CPU ms per request) requests per second
across the whole fleet, however many ingresses and workers it has.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Window:
    """Deltas over one measured window of `elapsed_s` seconds.

    ok / errors: requests the load generator finished in the window (answered 200, or anything else);
    cpu_s: CPU seconds per role (e.g. "ingress", "workers"), summed over the role's processes;
    redis_cpu_s: Redis's own CPU seconds (user + sys); commands: Redis calls per command name,
    the bench's own INFO calls already taken out; client_cpu_s: the load generator's own CPU seconds
    (not the gateway's; reported apart).
    """

    elapsed_s: float
    ok: int
    errors: int
    cpu_s: Mapping[str, float]
    redis_cpu_s: float
    commands: Mapping[str, int] = field(default_factory=dict)
    client_cpu_s: float | None = None


def ceiling_per_redis_core(redis_cpu_ms_per_req: float) -> float | None:
    """Projected fleet req/s one Redis core can serve: 1000 / (Redis CPU ms per request); None when unknown (<= 0)."""
    if redis_cpu_ms_per_req <= 0:
        return None
    return 1000.0 / redis_cpu_ms_per_req


def idle_rates(idle: Window) -> dict[str, float]:
    """CPU ms per second of every role (and "redis") over an idle window (no requests); {} when it has no length."""
    if idle.elapsed_s <= 0:
        return {}
    rates = {role: seconds * 1000 / idle.elapsed_s for role, seconds in idle.cpu_s.items()}
    rates["redis"] = idle.redis_cpu_s * 1000 / idle.elapsed_s
    return rates


def per_request(window: Window, idle_ms_per_s: Mapping[str, float] | None = None) -> dict[str, float | None]:
    """One window's figures: req/s, CPU ms per request per role and in all, Redis CPU ms, commands and
    `publish` calls per request (one `publish` per answered job), and the projected ceiling; with
    `idle_ms_per_s` (`idle_rates`), also the gateway's CPU per request net of its roles' idle rates.

    Per-request figures divide by the answered requests (`ok`); with none they are None.
    """
    out: dict[str, float | None] = {
        "rps": window.ok / window.elapsed_s if window.elapsed_s > 0 else None,
        "errors": float(window.errors),
    }
    n = window.ok
    for role, seconds in window.cpu_s.items():
        out[f"cpu_ms_{role}"] = seconds * 1000 / n if n else None
    out["cpu_ms_gateway"] = sum(window.cpu_s.values()) * 1000 / n if n else None
    if idle_ms_per_s is not None:
        idle_ms = sum(idle_ms_per_s.get(role, 0.0) for role in window.cpu_s) * window.elapsed_s
        out["cpu_ms_gateway_net"] = (sum(window.cpu_s.values()) * 1000 - idle_ms) / n if n else None
    out["cpu_ms_client"] = window.client_cpu_s * 1000 / n if n and window.client_cpu_s is not None else None
    redis_ms = window.redis_cpu_s * 1000 / n if n else None
    out["redis_cpu_ms"] = redis_ms
    out["redis_cmds"] = sum(window.commands.values()) / n if n else None
    out["publish"] = window.commands.get("publish", 0) / n if n else None
    out["ceiling_rps_per_redis_core"] = ceiling_per_redis_core(redis_ms) if redis_ms is not None else None
    return out


def spread_pct(values: Sequence[float]) -> float | None:
    """(max - min) / median * 100 of `values`, the run-to-run spread; None with fewer than 2 or a 0 median."""
    if len(values) < 2 or not statistics.median(values):
        return None
    return (max(values) - min(values)) / statistics.median(values) * 100


def summarize(workers: int, windows: Sequence[Window], idle: Window | None = None) -> dict[str, Any]:
    """The row of one worker count: the median over `windows` of every figure of `per_request`
    (the ceiling is taken from the median Redis CPU, not the median of ceilings), errors summed,
    the spread of the gateway's CPU per request over the windows, each role's idle rate
    (`idle_ms_s_<role>`, when `idle` is given) and the commands per request of the busiest
    commands (median calls / request; most first, ties by name)."""
    rates = idle_rates(idle) if idle is not None else None
    figures = [per_request(w, rates) for w in windows]
    row: dict[str, Any] = {"workers": workers, "reps": len(windows)}
    for role, rate in (rates or {}).items():
        row[f"idle_ms_s_{role}"] = rate
    for key in figures[0] if figures else ():
        values = [value for f in figures if (value := f.get(key)) is not None]
        row[key] = statistics.median(values) if values else None
    row["errors"] = sum(w.errors for w in windows)
    row["cpu_gateway_spread_pct"] = spread_pct([v for f in figures if (v := f.get("cpu_ms_gateway")) is not None])
    row["ok"] = sum(w.ok for w in windows)
    redis_ms = row.get("redis_cpu_ms")
    row["ceiling_rps_per_redis_core"] = ceiling_per_redis_core(redis_ms) if redis_ms is not None else None
    names = {name for w in windows for name in w.commands}
    breakdown = {name: statistics.median([w.commands.get(name, 0) / w.ok for w in windows if w.ok]) for name in names}
    row["redis_cmds_breakdown"] = dict(sorted(breakdown.items(), key=lambda kv: (-kv[1], kv[0])))
    return row


def change_pct(value: float | None, base: float | None) -> float | None:
    """(value / base - 1) * 100, or None when either is missing or base is 0."""
    if value is None or not base:
        return None
    return (value / base - 1) * 100


COLUMNS: list[tuple[str, str, str]] = [
    ("workers", "workers", "{:.0f}"),
    ("req/s", "rps", "{:,.0f}"),
    ("ingress CPU ms/req", "cpu_ms_ingress", "{:.3f}"),
    ("workers CPU ms/req", "cpu_ms_workers", "{:.3f}"),
    ("gateway CPU ms/req", "cpu_ms_gateway", "{:.3f}"),
    ("vs 1 worker", "cpu_change_pct", "{:+.1f} %"),
    ("spread over reps", "cpu_gateway_spread_pct", "{:.0f} %"),
    ("workers idle CPU ms/s", "idle_ms_s_workers", "{:.1f}"),
    ("gateway CPU ms/req net of idle", "cpu_ms_gateway_net", "{:.3f}"),
    ("vs 1 worker (net)", "cpu_net_change_pct", "{:+.1f} %"),
    ("Redis CPU ms/req", "redis_cpu_ms", "{:.3f}"),
    ("Redis cmds/req (with scripts' inner)", "redis_cmds", "{:.2f}"),
    ("client cmds/req (sequential)", "client_cmds", "{:.0f}"),
    ("publish/req", "publish", "{:.2f}"),
    ("ceiling req/s per Redis core (projected)", "ceiling_rps_per_redis_core", "{:,.0f}"),
    ("errors", "errors", "{:.0f}"),
]
"""The printed table: (header, row key, format)."""


def with_change(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` with `cpu_change_pct` and `cpu_net_change_pct`: each row's gateway CPU per request (gross, and net
    of idle) against the first row's (fewest workers)."""
    first = rows[0] if rows else {}
    return [
        {
            **row,
            "cpu_change_pct": change_pct(row.get("cpu_ms_gateway"), first.get("cpu_ms_gateway")),
            "cpu_net_change_pct": change_pct(row.get("cpu_ms_gateway_net"), first.get("cpu_ms_gateway_net")),
        }
        for row in rows
    ]


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """A Markdown table of `rows` (missing figures as an em dash)."""
    lines = ["| " + " | ".join(h for h, _, _ in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        cells = [fmt.format(row[key]) if row.get(key) is not None else "—" for _, key, fmt in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
