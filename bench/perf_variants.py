"""The performance table's four operator variants: plain, tracing, limits + budget, both.

Operators do not run the plain path: they trace every attempt into an
OpenTelemetry backend, and their keys carry limits and budgets. This module
measures the four combinations in one run, on the same mock:

  plain     a key with no limits or budget, no trace exporter
  tracing   the same key, every span exported by OTLP/HTTP (protobuf) to a
            local sink answering 200, as a collector would
  limits    a key with `rpm`, `tpm`, `max_concurrent` and a hard daily budget,
            all far above what the run reaches (admission, reservation and
            settlement run on every request; none refuses), no exporter
  both      the limited key with every span exported

Two fleets (Redis, one worker, one ingress each; the models priced so the
hard budget reserves a worst case): one without an exporter, one exporting.
Each key is on both. The four variants are loaded in turn, one rep each,
`--reps` times (the machine's speed drifts within minutes: in turn, the
variants share its moments). Per variant: req/s and CPU per answered request
of the ingress, the worker and Redis (ms, from the processes' own counters,
over the load generator's window and its warm-up), and the Redis commands of
one request (client commands, and those Lua scripts ran inside), counted on
sequential requests before the load.

LiteLLM, when measured: its proxy again with its own OpenTelemetry callback
(`callbacks: ["otel"]`, OTLP/HTTP to the same kind of sink) for the traced
row. Its limits and budgets need its database-backed virtual keys (a
Postgres), which the yardstick does not set up: no LiteLLM limits row.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracing_overhead import sink_bytes, start_sink

from support.procs import Fleet, http_ok, wait_until
from support.redis_count import commands_per_request

PLAIN_KEY = "tk-bench-plain-00000000001"
LIMITED_KEY = "tk-bench-limited-000000001"

CONFIG = """\
providers:
  mock: {{kind: openai_compatible, base_url: "{mock}/v1", api_key: bench-key}}
models:
  mock-d0: {{offers: [{{provider: mock, model: mock-d0, input_usd_per_mtok: 1, output_usd_per_mtok: 2}}]}}
gateway: {{max_queue_depth: 100000, worker_max_jobs: 500}}
orgs:
  bench:
    keys:
      - {{name: plain, key: {plain}}}
      - name: limited
        key: {limited}
        settings:
          limits: {{rpm: 10000000, tpm: 1000000000, max_concurrent: 100000}}
          budget: {{usd: 1000000, period: day, hard: true}}
"""
"""Both keys on one fleet; the limits and the budget are never reached."""

VARIANTS = (
    ("plain", False, PLAIN_KEY),
    ("tracing", True, PLAIN_KEY),
    ("limits", False, LIMITED_KEY),
    ("both", True, LIMITED_KEY),
)
"""(name, traced fleet, key) of each variant, in the order they are loaded and printed."""


@dataclass
class Traced:
    """One fleet of the variants: its base URL, Redis URL and the PIDs of ingress, worker and Redis."""

    base: str
    redis_url: str
    pids: dict[str, int]


@dataclass
class Row:
    """A variant's figures over the reps (medians are printed)."""

    rps: list[float] = field(default_factory=list)
    cpu: dict[str, list[float]] = field(default_factory=lambda: {"ingress": [], "worker": [], "redis": []})
    client_cmds: int | None = None
    inside_cmds: int | None = None


def cpu_s(pid: int) -> float:
    """User + system CPU seconds `pid` has used so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_fleet(fleet: Fleet, mock: str, env: dict[str, str]) -> Traced:
    """Redis, one worker and one ingress with both keys, `env` over the processes' environment."""
    redis_proc, redis_url = fleet.redis()
    config = fleet.workdir / "variants.yaml"
    config.write_text(CONFIG.format(mock=mock, plain=PLAIN_KEY, limited=LIMITED_KEY))
    worker = fleet.worker(config, redis_url, name="worker-variants", env=env)
    ingress, base = fleet.ingress(config, redis_url, env=env)
    return Traced(
        base, redis_url, {"ingress": ingress.popen.pid, "worker": worker.popen.pid, "redis": redis_proc.popen.pid}
    )


def otlp_env(sink: str) -> dict[str, str]:
    """Every span exported by OTLP/HTTP protobuf to `sink` (Turnout's exporter settings)."""
    return {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": sink,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    }


Load = Callable[[str, str, list[int], str], dict[str, Any]]
"""Runs one rep of the c=50, 0 ms cell against (gateway, key, pids, label): the load generator's gateway row."""


def measure(
    args: argparse.Namespace, mock: str, load: Load, sender: Callable[[str, str], Callable[[], None]]
) -> dict[str, Any]:
    """Every variant's figures (module doc); {variant: {rps, cpu_ms_*, redis commands}}."""
    sink = start_sink()
    plain_fleet, traced_fleet = Fleet(), Fleet()
    rows = {name: Row() for name, _, _ in VARIANTS}
    try:
        fleets = {False: start_fleet(plain_fleet, mock, {}), True: start_fleet(traced_fleet, mock, otlp_env(sink))}
        print(f"variants: plain fleet {fleets[False].base}, traced fleet {fleets[True].base}", flush=True)
        for name, traced, key in VARIANTS:
            counted = commands_per_request(fleets[traced].redis_url, sender(fleets[traced].base, key), n=args.count)
            rows[name].client_cmds, rows[name].inside_cmds = counted.fewest, counted.fewest_inside_scripts
        sunk = sink_bytes()
        for rep in range(args.reps):
            for name, traced, key in VARIANTS:
                fleet = fleets[traced]
                before = {role: cpu_s(pid) for role, pid in fleet.pids.items()}
                gateway = load(fleet.base, key, [fleet.pids["ingress"], fleet.pids["worker"]], f"variant-{name}-{rep}")
                answered = gateway["rps"] * (args.duration + args.warmup)  # as the load generator counts
                rows[name].rps.append(gateway["rps"])
                for role, pid in fleet.pids.items():
                    rows[name].cpu[role].append(1000 * (cpu_s(pid) - before[role]) / max(answered, 1))
        exported = sink_bytes() - sunk
    finally:
        traced_fleet.stop_all()
        plain_fleet.stop_all()
    out: dict[str, Any] = {"otlp_bytes": exported}
    for name, row in rows.items():
        cpu = {role: statistics.median(values) for role, values in row.cpu.items()}
        out[name] = {
            "rps": statistics.median(row.rps),
            "cpu_ms_ingress": cpu["ingress"],
            "cpu_ms_worker": cpu["worker"],
            "cpu_ms_redis": cpu["redis"],
            "cpu_ms_per_req": cpu["ingress"] + cpu["worker"],
            "redis_client_cmds": row.client_cmds,
            "redis_inside_cmds": row.inside_cmds,
        }
    return out


LITELLM_OTEL = """
litellm_settings:
  callbacks: ["otel"]
"""


def litellm_traced(
    args: argparse.Namespace, scripts: Path, port: int, load: Load, key: str, workdir: Path
) -> dict[str, Any] | None:
    """LiteLLM's proxy (production logging, one worker) with its OpenTelemetry callback exporting
    by OTLP/HTTP to a local sink: the c=50, 0 ms cell, `--reps` times; None when it does not start
    (its OpenTelemetry packages missing: `venv-litellm/bin/pip install opentelemetry-sdk
    opentelemetry-exporter-otlp-proto-http`)."""
    work = Path(os.environ.get("LITELLM_WORKDIR") or (Path(os.environ.get("TMPDIR") or "/tmp") / "turnout-litellm"))
    config = workdir / "litellm-otel.yaml"
    config.write_text((scripts / "litellm_config.yaml").read_text() + LITELLM_OTEL)
    sink = start_sink()
    env = {
        **os.environ,
        "LITELLM_MASTER_KEY": key,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_LOG": "ERROR",
        "LITELLM_MODE": "PRODUCTION",
        "OTEL_EXPORTER": "otlp_http",
        "OTEL_ENDPOINT": f"{sink}/v1/traces",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    }
    log = (workdir / "litellm-otel.log").open("wb")
    argv = [str(work / "venv-litellm" / "bin" / "litellm"), "--config", str(config), "--host", "127.0.0.1"]
    proc = subprocess.Popen(
        [*argv, "--port", str(port), "--num_workers", "1"], stdout=log, stderr=subprocess.STDOUT, env=env
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: http_ok(f"{base}/health/liveliness") or proc.poll() is not None, 120, "litellm (otel)")
        if proc.poll() is not None:
            print(f"LiteLLM with its otel callback did not start; see {workdir / 'litellm-otel.log'}", flush=True)
            return None
        sunk = sink_bytes()
        rows = [load(base, key, [proc.pid], f"litellm-otel-{rep}") for rep in range(args.reps)]
        return {
            "rps": statistics.median(r["rps"] for r in rows),
            "cpu_ms_per_req": statistics.median(r["gw_cpu_ms_per_req"] for r in rows),
            "otlp_bytes": sink_bytes() - sunk,
        }
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def fmt(value: float | None, digits: int) -> str:
    """A figure, or "—"."""
    return "—" if value is None else f"{value:,.{digits}f}"


def print_variants(t: dict[str, Any] | None, lite: dict[str, Any] | None) -> None:
    """The four-variant table: Turnout's figures, each against plain of the same run, and LiteLLM's."""
    if not t:
        return
    plain = t["plain"]
    lite = lite or {}
    print(
        "\n| variant (c=50, 0 ms, non-streaming) | req/s | CPU ms per request, ingress + worker | split ingress / worker / +Redis | "
        "Redis commands per request, client + inside scripts | LiteLLM req/s | LiteLLM CPU ms per request |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, _, _ in VARIANTS:
        v = t[name]
        rps_rel = "" if name == "plain" else f" ({100 * (v['rps'] / plain['rps'] - 1):+.0f} %)"
        cpu_rel = "" if name == "plain" else f" ({v['cpu_ms_per_req'] - plain['cpu_ms_per_req']:+.2f})"
        lv = lite.get(name) or {}
        cmds = f"{v['redis_client_cmds']} + {v['redis_inside_cmds']}"
        print(
            f"| {name} | {fmt(v['rps'], 0)}{rps_rel} | {fmt(v['cpu_ms_per_req'], 2)}{cpu_rel} | "
            f"{fmt(v['cpu_ms_ingress'], 2)} / {fmt(v['cpu_ms_worker'], 2)} / +{fmt(v['cpu_ms_redis'], 3)} | {cmds} | "
            f"{fmt(lv.get('rps'), 0)} | {fmt(lv.get('cpu_ms_per_req'), 2)} |"
        )
    ceiling = 1000 / plain["cpu_ms_redis"] if plain["cpu_ms_redis"] else None
    print(
        f"\nRedis CPU per plain request {fmt(plain['cpu_ms_redis'], 3)} ms: one Redis core's ceiling ~{fmt(ceiling, 0)} req/s "
        f"for the fleet; OTLP bytes exported during the traced runs: {t.get('otlp_bytes', 0):,}"
    )
