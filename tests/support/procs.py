"""Start and stop real processes for integration tests and benchmarks.

Owns: launching `redis-server`, the simulator, ingress and worker processes
on 127.0.0.1 with free ports, waiting until they answer, and stopping them.
Every process is bounded: `stop()` terminates, then kills after a grace.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx


def require_redis() -> None:
    """Fail in CI (`CI=true`), skip elsewhere, when redis-server is missing."""
    import pytest

    if shutil.which("redis-server") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("redis-server is required in CI (apt-get install -y redis-server)")
        pytest.skip("redis-server not installed")


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll `check` every 50 ms until true; raise TimeoutError naming `what`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{what} did not come up within {timeout_s} s")


def http_ok(url: str) -> bool:
    """True when GET `url` answers 200."""
    return httpx.get(url, timeout=0.5).status_code == 200


@dataclass
class Proc:
    """A started child process with its log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    argv: list[str] = field(default_factory=list)

    def alive(self) -> bool:
        """True while the process runs."""
        return self.popen.poll() is None

    def stop(self, sig: int = signal.SIGTERM, grace_s: float = 10.0) -> int | None:
        """Send `sig`, wait up to `grace_s`, then kill. Returns the exit code."""
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=5)
        return self.popen.returncode

    def log(self) -> str:
        """The process's combined output so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


TEST_REDIS_CALL_TIMEOUT = {"TURNOUT_REDIS_CALL_TIMEOUT_MS": "5000"}
"""The request path's Redis bound in test fleets: 5 s, not the 0.4 s default. On a loaded 2-core CI machine a
healthy Redis call can take longer than 0.4 s, and a test that is not about that bound must not see its 503s or
its fail-open health reads; the tests that are about it (`test_redis_paused.py`) set the default back."""


@dataclass
class Fleet:
    """Processes started by one test session, stopped together."""

    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="turnout-test-")))
    procs: list[Proc] = field(default_factory=list)

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Proc:
        """Start `argv` with output to `<workdir>/<name>.log`.

        The child's environment is this one's, with `TEST_REDIS_CALL_TIMEOUT_MS` under it and `env` over it.
        """
        log_path = self.workdir / f"{name}.log"
        with open(log_path, "wb") as out:  # the child keeps its own descriptor
            popen = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                env={**TEST_REDIS_CALL_TIMEOUT, **os.environ, **(env or {})},
            )
        proc = Proc(name=name, popen=popen, log_path=log_path, argv=argv)
        self.procs.append(proc)
        return proc

    def redis(self, aof: bool = True, unix: bool = False) -> tuple[Proc, str]:
        """Start a private `redis-server` (AOF on, as Turnout's processes require;
        `aof=False` for the tests of their refusal; `unix=True`: on a Unix socket
        only, no TCP port); returns it and its URL."""
        server = shutil.which("redis-server")
        if server is None:
            raise FileNotFoundError("redis-server is not on PATH (apt-get install -y redis-server)")
        port = 0 if unix else free_port()
        data = Path(tempfile.mkdtemp(prefix="redis-", dir=self.workdir))
        socket_path = data / "redis.sock"
        proc = self.spawn(
            data.name,
            [
                server,
                "--port",
                str(port),
                *(["--unixsocket", str(socket_path), "--unixsocketperm", "700"] if unix else ["--bind", "127.0.0.1"]),
                "--dir",
                str(data),
                "--appendonly",
                "yes" if aof else "no",
                "--save",
                "",
                "--loglevel",
                "warning",
            ],
        )
        url = f"unix://{socket_path}" if unix else f"redis://127.0.0.1:{port}/0"
        import redis

        def ping() -> bool:
            with redis.Redis.from_url(url) as client:
                return bool(client.ping())

        wait_until(ping, 10, "redis-server")
        return proc, url

    def sim(self) -> tuple[Proc, str]:
        """Start the provider simulator; returns it and its base URL."""
        port = free_port()
        proc = self.spawn(f"sim-{port}", [sys.executable, "-m", "turnout_cli.main", "sim", "--port", str(port)])
        base = f"http://127.0.0.1:{port}"
        wait_until(lambda: http_ok(f"{base}/sim/health"), 15, "simulator")
        return proc, base

    def ingress(
        self,
        config_path: Path,
        redis_url: str,
        port: int | None = None,
        env: dict[str, str] | None = None,
        ready: bool = True,
    ) -> tuple[Proc, str]:
        """Start an ingress process (extra `env` variables); returns it and its base URL, once it is
        ready (`/health/readiness` 200) unless `ready` is False (e.g. started before its Redis)."""
        port = port or free_port()
        proc = self.spawn(
            f"ingress-{port}",
            [
                sys.executable,
                "-m",
                "turnout_cli.main",
                "ingress",
                "--config",
                str(config_path),
                "--redis-url",
                redis_url,
                "--port",
                str(port),
            ],
            env,
        )
        base = f"http://127.0.0.1:{port}"
        if ready:
            wait_until(lambda: http_ok(f"{base}/health/readiness"), 20, "ingress")
        return proc, base

    def worker(
        self,
        config_path: Path,
        redis_url: str,
        name: str = "worker",
        env: dict[str, str] | None = None,
        ready: bool = True,
    ) -> Proc:
        """Start a worker process (extra `env` variables), returned once its log says it is ready
        unless `ready` is False (e.g. started before its Redis)."""
        proc = self.spawn(
            name,
            [
                sys.executable,
                "-m",
                "turnout_cli.main",
                "worker",
                "--config",
                str(config_path),
                "--redis-url",
                redis_url,
            ],
            env,
        )
        if ready:
            wait_until(lambda: "worker ready" in proc.log(), 20, name)
        return proc

    def restart(self, proc: Proc) -> Proc:
        """Start `proc`'s command again (after it was stopped), under the same name."""
        self.procs.remove(proc)
        return self.spawn(proc.name, proc.argv)

    def stop_all(self) -> None:
        """Stop every process, newest first."""
        for proc in reversed(self.procs):
            proc.stop(grace_s=5)
