#!/usr/bin/env python3
"""The performance table of one run: Turnout (and LiteLLM when set up) against the mock, with ratios.

Starts on 127.0.0.1: a private redis-server, the fast mock upstream, one
Turnout ingress and one worker; measures every figure of the table below
with the yardstick's load generator (direct-to-mock and through-gateway
interleaved, so the direct run is the baseline of the same run), then a
second fleet with two workers beside it, the two loaded in turn for the
two-worker row; then, when the yardstick's LiteLLM is installed
(`../shared/bench/litellm/run_litellm.sh prod 1` once), LiteLLM's proxy in
its production logging setup with one worker against the same mock.

Figures (medians of `--reps` runs of `--duration` s each):
  non-streaming req/s, 0 ms and 50 ms upstream, c=50
  added p50 / p99 at c=1, 0 ms upstream (gateway minus direct)
  CPU per queued request (ingress + worker, c=50, 0 ms)
  streaming req/s (20 chunks, 0 ms, c=50) and CPU per 20-chunk stream
  Redis commands per queued request (1 and 2 workers) and per stream
  RSS at rest (ingress + 1 worker, after a warm-up)
  2 workers vs 1: CPU per queued request (c=50, 0 ms), the two fleets
    loaded in turn, one rep each, `--reps` times

Usage:
    .venv/bin/python bench/perf_table.py [--duration 8] [--reps 3] [--litellm auto|off] [--quick]
        [--yardstick DIR] [--json out.json]

The yardstick's mock and load generator run under a venv of their own with
uvloop and orjson (`$TMPDIR/turnout-bench-yardstick`, made on first use).
LiteLLM's config points at the mock on port 9100: the mock listens there
when LiteLLM is measured (LiteLLM is skipped if 9100 is taken). Every load
loop is bounded by duration and count; traffic goes to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

import perf_variants
from run_gateway_bench import CONFIG, KEY

from support.procs import Fleet, free_port, http_ok, wait_until
from support.redis_count import commands_per_request

LITELLM_KEY = "sk-bench-0123456789abcdef0123456789abcdef"
LITELLM_MOCK_PORT = 9100
"""The port LiteLLM's benchmark config sends its two models to."""


def yardstick_python() -> str:
    """A python with uvloop and orjson for the mock and the load generator (a venv made on first use)."""
    venv = Path(os.environ.get("TMPDIR") or tempfile.gettempdir()) / "turnout-bench-yardstick"
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"making the yardstick venv {venv} (uvloop, orjson)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "uvloop", "orjson"], check=True)
    return str(python)


def proc_tree_stats(pids: list[int]) -> tuple[float, float]:
    """(RSS MiB, CPU seconds) summed over `pids` and their descendants."""
    tree = set(pids)
    todo = list(pids)
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in tree:
                tree.add(child)
                todo.append(child)
    rss_kib, cpu_s = 0, 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    for pid in tree:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss_kib += int(line.split()[1])
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cpu_s += (int(fields[11]) + int(fields[12])) / ticks
        except OSError:
            continue
    return rss_kib / 1024, cpu_s


def chat_sender(base: str, key: str, model: str, *, stream: bool = False) -> Any:
    """A function sending one chat request to `base` and checking its answer (for command counts)."""
    client = httpx.Client(timeout=30, headers={"authorization": f"Bearer {key}"})
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 20, "stream": stream}

    def send() -> None:
        response = client.post(f"{base}/v1/chat/completions", json=body)
        if response.status_code != 200 or (stream and b"[DONE]" not in response.content):
            raise RuntimeError(f"bench request failed: {response.status_code} {response.text[:200]}")

    return send


def load(
    py: str,
    yardstick: Path,
    gateway: str,
    key: str,
    mock: str,
    pids: list[int],
    label: str,
    cells: list[tuple[str, str, str]],
    args: argparse.Namespace,
    workdir: Path,
    *,
    direct: bool = True,
) -> dict[tuple[str, int, int], Any]:
    """Run the load generator over `cells` (modes, delays, concurrencies); {(mode, delay, c): summary row}
    (`direct` False: the gateway alone, no direct-to-mock run beside it)."""
    rows: dict[tuple[str, int, int], Any] = {}
    for i, (modes, delays, concurrency) in enumerate(cells):
        out = workdir / f"{label}-{i}.json"
        subprocess.run(
            [
                py,
                str(yardstick / "bench_gateway.py"),
                "--gateway",
                gateway,
                "--gateway-key",
                key,
                "--mock",
                mock,
                "--concurrency",
                concurrency,
                "--delays",
                delays,
                "--modes",
                modes,
                "--duration",
                str(args.duration),
                "--warmup",
                str(args.warmup),
                "--reps",
                str(args.reps),
                "--gateway-pids",
                ",".join(map(str, pids)),
                "--label",
                label,
                "--json",
                str(out),
                *([] if direct else ["--skip-direct"]),
            ],
            check=True,
            stdout=subprocess.DEVNULL if args.quiet else None,
        )
        for row in json.loads(out.read_text())["summary"]:
            rows[(row["mode"], row["delay_ms"], row["conc"])] = row
    return rows


CELLS = [("nonstream", "0,50", "50"), ("nonstream", "0", "1"), ("stream", "0", "50")]
"""The load generator's cells the table needs: (modes, delays, concurrencies)."""

PAIRED_CELL = ("nonstream", "0", "50")
"""The cell of the two-worker row (CPU per queued request, c=50, 0 ms)."""


def figures_of(rows: dict[tuple[str, int, int], Any]) -> dict[str, float | None]:
    """The table's load figures from the load generator's summary rows (gateway and direct)."""
    ns0, ns50, c1, st = (
        rows[("nonstream", 0, 50)],
        rows[("nonstream", 50, 50)],
        rows[("nonstream", 0, 1)],
        rows[("stream", 0, 50)],
    )
    return {
        "rps_0ms_c50": ns0["gateway"]["rps"],
        "direct_rps_0ms_c50": ns0["direct"]["rps"],
        "rps_50ms_c50": ns50["gateway"]["rps"],
        "direct_rps_50ms_c50": ns50["direct"]["rps"],
        "added_p50_c1": c1["added"]["p50"],
        "added_p99_c1": c1["added"]["p99"],
        "direct_p50_c1": c1["direct"]["p50"],
        "cpu_ms_per_req": ns0["gateway"]["gw_cpu_ms_per_req"],
        "stream_rps_c50": st["gateway"]["rps"],
        "direct_stream_rps_c50": st["direct"]["rps"],
        "cpu_ms_per_stream": st["gateway"]["gw_cpu_ms_per_req"],
        "errors": sum((r["gateway"]["errors"] or 0) + (r["direct"]["errors"] or 0) for r in (ns0, ns50, c1, st)),
    }


def turnout_fleet(
    fleet: Fleet, py: str, yardstick: Path, mock_port: int, workers: int, *, mock: str | None = None
) -> tuple[str, str, list[int]]:
    """Redis, the mock (under the yardstick's python; `mock`: one already running), `workers`
    workers and one ingress: (gateway, mock, PIDs)."""
    _, redis_url = fleet.redis()
    if mock is None:
        fleet.spawn("mock", [py, str(yardstick / "mock_upstream.py"), "--port", str(mock_port)])
        mock = f"http://127.0.0.1:{mock_port}"
        wait_until(lambda: http_ok(f"{mock}/health"), 10, "mock upstream")
    config = fleet.workdir / "bench.yaml"
    config.write_text(CONFIG.format(mock=mock, key=KEY, max_jobs=500))
    pids = [fleet.worker(config, redis_url, name=f"worker-{i}").popen.pid for i in range(workers)]
    ingress, base = fleet.ingress(config, redis_url)
    fleet.redis_url = redis_url  # type: ignore[attr-defined]
    return base, mock, [ingress.popen.pid, *pids]


def at_rest_rss(send: Any, pids: list[int]) -> float:
    """RSS (MiB) of `pids` after 20 requests and 2 s idle."""
    for _ in range(20):
        send()
    time.sleep(2)
    return proc_tree_stats(pids)[0]


def measure_turnout(args: argparse.Namespace, py: str, mock_port: int, workdir: Path) -> dict[str, Any]:
    """Every Turnout figure with one worker, then the two-worker figures: a second fleet
    (two workers, the same mock) beside the first, and the two loaded in turn (`paired_cpu`)."""
    out: dict[str, Any] = {}
    one, two = Fleet(), Fleet()
    try:
        base, mock, pids = turnout_fleet(one, py, args.yardstick, mock_port, 1)
        print(f"turnout 1 worker: {base} pids {pids}, logs in {one.workdir}", flush=True)
        send = chat_sender(base, KEY, "mock-d0")
        out["rss_at_rest_mib"] = at_rest_rss(send, pids)
        out["rss_ingress_mib"] = proc_tree_stats(pids[:1])[0]
        out["rss_worker_mib"] = proc_tree_stats(pids[1:])[0]
        counted = commands_per_request(one.redis_url, send, n=args.count)  # type: ignore[attr-defined]
        out["redis_cmds_per_req_1w"] = counted.fewest
        out["redis_cmds_breakdown_1w"] = dict(counted.breakdown)
        streamed = commands_per_request(
            one.redis_url,  # type: ignore[attr-defined]
            chat_sender(base, KEY, "mock-d0", stream=True),
            n=args.count,
        )
        out["redis_cmds_per_stream"] = streamed.fewest
        out["redis_cmds_breakdown_stream"] = dict(streamed.breakdown)
        out.update(figures_of(load(py, args.yardstick, base, KEY, mock, pids, "turnout-1w", CELLS, args, workdir)))
        base2, _, pids2 = turnout_fleet(two, py, args.yardstick, mock_port, 2, mock=mock)
        print(f"turnout 2 workers: {base2} pids {pids2}, logs in {two.workdir}", flush=True)
        counted = commands_per_request(two.redis_url, chat_sender(base2, KEY, "mock-d0"), n=args.count)  # type: ignore[attr-defined]
        out["redis_cmds_per_req_2w"] = counted.fewest
        out["redis_cmds_breakdown_2w"] = dict(counted.breakdown)
        out.update(paired_cpu(args, py, mock, workdir, (base, pids), (base2, pids2)))
    finally:
        two.stop_all()
        one.stop_all()
    return out


def paired_cpu(
    args: argparse.Namespace,
    py: str,
    mock: str,
    workdir: Path,
    one: tuple[str, list[int]],
    two: tuple[str, list[int]],
) -> dict[str, float]:
    """CPU per queued request (c=50, 0 ms) of the one-worker and the two-worker fleet, loaded in
    turn, one rep each, `args.reps` times: medians (ms), and the two-worker fleet's req/s.

    In turn, because the machine's speed drifts by several per cent within minutes: measured
    one after the other, the row compared two moments of the machine as much as two fleets
    (bench/README.md "Two workers against one, in turn").
    """
    once = argparse.Namespace(**{**vars(args), "reps": 1})
    cpu: dict[int, list[float]] = {1: [], 2: []}
    rps: list[float] = []
    for rep in range(args.reps):
        for workers, (base, pids) in ((1, one), (2, two)):
            label = f"paired-{workers}w-{rep}"
            rows = load(py, args.yardstick, base, KEY, mock, pids, label, [PAIRED_CELL], once, workdir, direct=False)
            gateway = rows[("nonstream", 0, 50)]["gateway"]
            cpu[workers].append(gateway["gw_cpu_ms_per_req"])
            if workers == 2:
                rps.append(gateway["rps"])
    return {
        "cpu_ms_per_req_1w_paired": statistics.median(cpu[1]),
        "cpu_ms_per_req_2w": statistics.median(cpu[2]),
        "rps_0ms_c50_2w": statistics.median(rps),
    }


def litellm_dir(args: argparse.Namespace) -> Path | None:
    """The yardstick's LiteLLM scripts, when LiteLLM is installed and wanted."""
    scripts = args.yardstick / "litellm"
    work = Path(os.environ.get("LITELLM_WORKDIR") or (Path(os.environ.get("TMPDIR") or "/tmp") / "turnout-litellm"))
    if args.litellm == "off" or not (scripts / "run_litellm.sh").exists():
        return None
    if not (work / "venv-litellm" / "bin" / "litellm").exists():
        print(f"LiteLLM not installed in {work}: run {scripts / 'run_litellm.sh'} prod 1 once (skipped)", flush=True)
        return None
    return scripts


def measure_litellm(args: argparse.Namespace, py: str, scripts: Path, workdir: Path) -> dict[str, Any]:
    """LiteLLM's figures: its proxy (production logging, one worker) against the mock on port 9100."""
    port = free_port()
    fleet = Fleet()
    out: dict[str, Any] = {}
    fleet.spawn("mock", [py, str(args.yardstick / "mock_upstream.py"), "--port", str(LITELLM_MOCK_PORT)])
    mock = f"http://127.0.0.1:{LITELLM_MOCK_PORT}"
    try:
        wait_until(lambda: http_ok(f"{mock}/health"), 10, "mock upstream")
        subprocess.run(
            [str(scripts / "run_litellm.sh"), "prod", "1"], check=True, env={**os.environ, "PORT": str(port)}
        )
        work = Path(os.environ.get("LITELLM_WORKDIR") or (Path(os.environ.get("TMPDIR") or "/tmp") / "turnout-litellm"))
        pid = int((work / "litellm.pid").read_text())
        base = f"http://127.0.0.1:{port}"
        send = chat_sender(base, LITELLM_KEY, "mock-d0")
        out["rss_at_rest_mib"] = at_rest_rss(send, [pid])
        out.update(
            figures_of(load(py, args.yardstick, base, LITELLM_KEY, mock, [pid], "litellm-1w", CELLS, args, workdir))
        )
        subprocess.run([str(scripts / "stop_litellm.sh")], check=False)
        if args.variants:
            one_rep = rep_loader(args, py, mock, workdir)
            out["variants"] = {
                "plain": {"rps": out["rps_0ms_c50"], "cpu_ms_per_req": out["cpu_ms_per_req"]},
                "tracing": perf_variants.litellm_traced(args, scripts, free_port(), one_rep, LITELLM_KEY, workdir),
            }
    finally:
        subprocess.run([str(scripts / "stop_litellm.sh")], check=False)
        fleet.stop_all()
    return out


def rep_loader(args: argparse.Namespace, py: str, mock: str, workdir: Path) -> perf_variants.Load:
    """One rep of the c=50, 0 ms cell against a gateway, its key and PIDs: the load generator's gateway row."""
    once = argparse.Namespace(**{**vars(args), "reps": 1})

    def one_rep(gateway: str, key: str, pids: list[int], label: str) -> dict[str, Any]:
        rows = load(py, args.yardstick, gateway, key, mock, pids, label, [PAIRED_CELL], once, workdir, direct=False)
        return dict(rows[("nonstream", 0, 50)]["gateway"])

    return one_rep


def measure_variants(args: argparse.Namespace, py: str, workdir: Path) -> dict[str, Any]:
    """The four operator variants (`perf_variants`), against a mock of their own."""
    fleet = Fleet()
    port = free_port()
    fleet.spawn("mock", [py, str(args.yardstick / "mock_upstream.py"), "--port", str(port)])
    mock = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: http_ok(f"{mock}/health"), 10, "mock upstream")
        return perf_variants.measure(
            args, mock, rep_loader(args, py, mock, workdir), lambda base, key: chat_sender(base, key, "mock-d0")
        )
    finally:
        fleet.stop_all()


def fmt(value: float | None, digits: int = 1) -> str:
    """A figure, or "—" when not measured."""
    return "—" if value is None else f"{value:,.{digits}f}"


def ratio(a: float | None, b: float | None) -> str:
    """a / b as "×N.N", or "" when either is missing."""
    return "" if a is None or b is None or b == 0 else f" ({a / b:.1f}×)"


def share(a: float | None, b: float | None) -> str:
    """a / b as a percentage, or "—"."""
    return "—" if a is None or b is None or b == 0 else f"{100 * a / b:.0f} %"


def print_table(t: dict[str, Any], lite: dict[str, Any] | None) -> None:
    """The issue's table: LiteLLM | Turnout (× LiteLLM) | direct-to-mock baseline of the same run."""
    l_ = lite or {}

    def row(name: str, key: str, digits: int = 1, direct: str = "", invert: bool = False) -> None:
        tv, lv = t.get(key), l_.get(key)
        rel = ratio(lv, tv) if invert else ratio(tv, lv)
        base = ""
        if direct:  # the same run's direct-to-mock figure, and each gateway's share of it
            base = f"{fmt(t.get(direct), digits)} (Turnout {share(tv, t.get(direct))}, LiteLLM {share(lv, l_.get(direct))})"
        print(f"| {name} | {fmt(lv, digits)} | {fmt(tv, digits)}{rel} | {base} |")

    print("\n| figure | LiteLLM | Turnout (× LiteLLM; for costs, LiteLLM ÷ Turnout) | direct to mock, same run |")
    print("|---|---|---|---|")
    row("non-streaming req/s, 0 ms upstream, c=50", "rps_0ms_c50", 0, "direct_rps_0ms_c50")
    row("non-streaming req/s, 50 ms upstream, c=50", "rps_50ms_c50", 0, "direct_rps_50ms_c50")
    print(
        f"| added p50 / p99, c=1, 0 ms (ms) | {fmt(l_.get('added_p50_c1'), 2)} / {fmt(l_.get('added_p99_c1'), 2)} | "
        f"{fmt(t.get('added_p50_c1'), 2)} / {fmt(t.get('added_p99_c1'), 2)} | p50 {fmt(t.get('direct_p50_c1'), 2)} |"
    )
    row("CPU per queued request, ingress + worker (ms)", "cpu_ms_per_req", 2, invert=True)
    row("streaming req/s, 20 chunks, 0 ms, c=50", "stream_rps_c50", 0, "direct_stream_rps_c50")
    row("CPU per 20-chunk stream (ms)", "cpu_ms_per_stream", 2, invert=True)
    print(
        f"| Redis commands per queued request, 1 / 2 workers | — | {fmt(t.get('redis_cmds_per_req_1w'))} / "
        f"{fmt(t.get('redis_cmds_per_req_2w'))} | |"
    )
    print(f"| Redis commands per stream | — | {fmt(t.get('redis_cmds_per_stream'))} | |")
    print(
        f"| RSS at rest, ingress + 1 worker (MiB) | {fmt(l_.get('rss_at_rest_mib'), 0)} | "
        f"{fmt(t.get('rss_at_rest_mib'), 0)} (ingress {fmt(t.get('rss_ingress_mib'), 0)}, "
        f"worker {fmt(t.get('rss_worker_mib'), 0)}) | |"
    )
    one, two = t.get("cpu_ms_per_req_1w_paired"), t.get("cpu_ms_per_req_2w")
    more = (
        "—"
        if not one or two is None
        else f"{100 * (two - one) / one:+.0f} % ({fmt(one, 2)} → {fmt(two, 2)} ms, in turn; {fmt(t.get('rps_0ms_c50_2w'), 0)} req/s)"
    )
    print(f"| 2 workers vs 1, CPU per queued request | — | {more} | |")
    print(f"\nerrors: turnout {t.get('errors')}, litellm {l_.get('errors', '—')}")
    for key in ("redis_cmds_breakdown_1w", "redis_cmds_breakdown_2w", "redis_cmds_breakdown_stream"):
        print(f"{key}: {json.dumps(t.get(key), sort_keys=True)}")


def main() -> int:
    """Measure and print the table; 0 on success."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=8)
    parser.add_argument("--warmup", type=float, default=2)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--count", type=int, default=20, help="sequential requests counted for Redis commands")
    parser.add_argument("--litellm", choices=("auto", "off"), default="auto")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 rep of 3 s")
    parser.add_argument("--quiet", action="store_true", help="only the table, not the load generator's lines")
    parser.add_argument("--yardstick", type=Path, default=HERE.parent.parent / "shared" / "bench")
    parser.add_argument(
        "--variants",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the four operator variants: plain, tracing, limits + budget, both (bench/perf_variants.py)",
    )
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.quick:
        args.duration, args.warmup, args.reps = 3, 1, 1
    if not (args.yardstick / "bench_gateway.py").exists():
        print(f"no load generator at {args.yardstick}; pass --yardstick DIR", file=sys.stderr)
        return 2
    py = yardstick_python()
    scripts = litellm_dir(args)
    if scripts is not None and not port_free(LITELLM_MOCK_PORT):
        print(f"port {LITELLM_MOCK_PORT} is taken: LiteLLM's config needs the mock there (skipped)", flush=True)
        scripts = None
    with tempfile.TemporaryDirectory(prefix="turnout-perf-") as tmp:
        workdir = Path(tmp)
        turnout = measure_turnout(args, py, free_port(), workdir)
        variants = measure_variants(args, py, workdir) if args.variants else None
        lite = measure_litellm(args, py, scripts, workdir) if scripts is not None else None
    print_table(turnout, lite)
    perf_variants.print_variants(variants, (lite or {}).get("variants"))
    if args.json:
        Path(args.json).write_text(json.dumps({"turnout": turnout, "variants": variants, "litellm": lite}, indent=1))
    return 0


def port_free(port: int) -> bool:
    """True when nothing listens on 127.0.0.1:`port`."""
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


if __name__ == "__main__":
    sys.exit(main())
