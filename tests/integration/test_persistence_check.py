"""Every process that writes jobs checks Redis persistence at start (real processes):
without AOF, `turnout ingress` and `turnout worker` refuse with a clear message and a
non-zero exit; allowed (`--allow-no-aof` / `TURNOUT_ALLOW_NO_AOF=1`) they start and warn."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from support.procs import Fleet, free_port, http_ok, require_redis, wait_until

pytestmark = pytest.mark.integration

CONFIG = """\
providers:
  sim-a: {kind: openai_compatible, base_url: "http://127.0.0.1:9/v1", api_key: key-a}
models:
  m: {offers: [{provider: sim-a, model: m}]}
"""


@pytest.fixture(scope="module")
def no_aof() -> Iterator[tuple[Fleet, str]]:
    """A redis-server with AOF off, and a configuration file."""
    require_redis()
    fleet = Fleet()
    try:
        _, url = fleet.redis(aof=False)
        (fleet.workdir / "turnout.yaml").write_text(CONFIG)
        yield fleet, url
    finally:
        fleet.stop_all()


def _argv(command: str, fleet: Fleet, url: str, *extra: str) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "turnout_cli.main",
        command,
        "--config",
        str(fleet.workdir / "turnout.yaml"),
        "--redis-url",
        url,
        *extra,
    ]
    return argv + (["--port", str(free_port())] if command == "ingress" else [])


@pytest.mark.parametrize("command", ["ingress", "worker"])
def test_without_aof_the_process_refuses_to_start(no_aof: tuple[Fleet, str], command: str) -> None:
    fleet, url = no_aof
    proc = fleet.spawn(f"{command}-refused", _argv(command, fleet, url))
    code = proc.popen.wait(timeout=30)
    log = proc.log()
    print(f"\n{command} on a Redis without AOF: exit {code}")
    assert code == 3, log
    assert "refusing to start" in log and "appendonly no" in log and "queued jobs" in log
    assert "TURNOUT_ALLOW_NO_AOF=1" in log and '"event": "redis_persistence"' in log


def test_allowed_by_flag_or_environment_both_start_and_warn(no_aof: tuple[Fleet, str]) -> None:
    fleet, url = no_aof
    worker = fleet.spawn("worker-allowed", _argv("worker", fleet, url, "--allow-no-aof"))
    wait_until(lambda: "worker ready" in worker.log(), 30, "worker allowed by --allow-no-aof")
    argv = _argv("ingress", fleet, url)
    ingress = fleet.spawn("ingress-allowed", argv, env={"TURNOUT_ALLOW_NO_AOF": "1"})
    base = f"http://127.0.0.1:{argv[-1]}"
    wait_until(
        lambda: http_ok(f"{base}/health/liveness") or http_ok(f"{base}/health/readiness"),
        30,
        "ingress allowed by TURNOUT_ALLOW_NO_AOF",
    )
    for proc in (worker, ingress):
        assert proc.alive()
        assert "Starting anyway: TURNOUT_ALLOW_NO_AOF is set" in proc.log() and '"level": "WARNING"' in proc.log()
