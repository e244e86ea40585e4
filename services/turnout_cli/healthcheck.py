"""`turnout healthcheck`: the container image's one `HEALTHCHECK` for its three commands.

Owns: which address answers for the server a container runs, read from its
main process's command line (`/proc/1/cmdline`: `turnout ingress`, `turnout
worker` or `turnout sim` with their `--host`/`--port`, after the `-OO`
restart too) and the process settings (`turnout.settings.Settings`), and one
rule per command:

- **ingress**: `GET /health/liveness` answers 200 (the route the Kubernetes
  liveness probe uses; readiness, which also needs Redis, is not the
  container's health).
- **sim**: its port answers HTTP at all (any status).
- **worker**: its Prometheus side port (`TURNOUT_METRICS_PORT`, default 9464)
  answers `GET /metrics`; with the port off (0) the check passes, as the
  worker exits when its loop dies (infra/k8s/worker.yaml says the same).

Exit 0 healthy, 1 not (with the reason on stderr), as `HEALTHCHECK` expects.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

from turnout.errors import ConfigError
from turnout.settings import Settings

ROLES = ("ingress", "worker", "sim")
_ANY_ADDRESS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}  # a wildcard bind, probed on loopback


def _option(argv: Sequence[str], name: str) -> str | None:
    """The value of `--name VALUE` or `--name=VALUE` in `argv` (the last one given), else None."""
    value = None
    for i, word in enumerate(argv):
        if word == name and i + 1 < len(argv):
            value = argv[i + 1]
        elif word.startswith(name + "="):
            value = word.split("=", 1)[1]
    return value


def _url(host: str, port: int, path: str) -> str:
    host = _ANY_ADDRESS.get(host, host)
    return f"http://[{host}]:{port}{path}" if ":" in host else f"http://{host}:{port}{path}"


def probe_target(argv: Sequence[str], env: Mapping[str, str]) -> tuple[str, bool] | None:
    """What to ask for the server started as `argv` (a command line, words as in `/proc/PID/cmdline`).

    Returns `(url, must_be_200)`, or None when there is nothing to ask (a worker
    with its metrics port off). Raises `ValueError` naming the command line when
    it runs none of `ROLES` (the image's other commands are not servers).
    """
    role = next((word for word in argv if word in ROLES), None)
    if role is None:
        raise ValueError(f"the container runs none of turnout {', '.join(ROLES)}: {' '.join(argv)!r}")
    settings = Settings.from_env(env)
    if role == "worker":
        if not settings.metrics_port:
            return None
        return _url(settings.metrics_host, settings.metrics_port, "/metrics"), False
    if role == "sim":
        host, port = _option(argv, "--host") or "127.0.0.1", int(_option(argv, "--port") or 9100)
        return _url(host, port, "/"), False
    host, port = _option(argv, "--host") or settings.host, int(_option(argv, "--port") or settings.port)
    return _url(host, port, "/health/liveness"), True


def check(url: str, must_be_200: bool, timeout_s: float = 2.0) -> str | None:
    """None when `url` answers (200 when `must_be_200`, else any HTTP status), else the reason."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            status = int(answer.status)
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (OSError, ValueError) as exc:
        return f"{url}: {exc}"
    if must_be_200 and status != 200:
        return f"{url}: HTTP {status}"
    return None


def cmd_healthcheck(cmdline: Path = Path("/proc/1/cmdline"), env: Mapping[str, str] | None = None) -> int:
    """Check the server that `cmdline` (NUL-separated words) runs; 0 healthy, 1 not (reason on stderr)."""
    try:
        argv = cmdline.read_bytes().decode("utf-8", "replace").split("\0")
        target = probe_target([word for word in argv if word], os.environ if env is None else env)
    except (OSError, ValueError, ConfigError) as exc:
        print(f"turnout healthcheck: {exc}", file=sys.stderr)
        return 1
    if target is None:
        return 0
    reason = check(*target)
    if reason is not None:
        print(f"turnout healthcheck: {reason}", file=sys.stderr)
        return 1
    return 0
