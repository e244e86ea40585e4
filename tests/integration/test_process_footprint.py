"""What a running ingress and worker leave unloaded (issue: Performance, memory).

A real fleet (Redis, simulator, one ingress, one worker) serves a queued
request and a stream; then each process's memory map (`/proc/<pid>/maps`)
must show neither `cryptography`'s OpenSSL bindings (~6 MiB mapped, loaded
by PyJWT, which redis-py 5.3 and later import: `pyproject.toml`) nor, in the
ingress, the `websockets` package uvicorn loads unless told there is no
WebSocket route (`turnout_cli.main`). Both are native modules, so a map
lists them once imported. Each runs under Python's `-OO` (no docstrings in
memory, `turnout_cli.optimize`): the PID the fleet started now runs a
command line with the two `-O` flags, unless `TURNOUT_PYTHON_OPTIMIZE=0`.
RSS at rest is measured in bench/README.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from support.gateway import Gateway, one_model_config, start_gateway
from support.procs import Fleet, require_redis

pytestmark = pytest.mark.integration

KEY = "tk-test-footprint-000001"

CONFIG = one_model_config("footprint-ok")


@pytest.fixture
def gw() -> Iterator[Gateway]:
    require_redis()
    fleet = Fleet()
    try:
        yield start_gateway(fleet, CONFIG, key=KEY)
    finally:
        fleet.stop_all()


def _servers(gw: Gateway) -> dict[str, int]:
    procs = {p.name.split("-")[0]: p.popen.pid for p in gw.fleet.procs if p.name.startswith(("ingress", "worker"))}
    assert set(procs) == {"ingress", "worker"}
    return procs


def _interpreter_flags(pid: int) -> list[str]:
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").decode().split("\0")
    return argv[1 : argv.index("-m")]


def _mapped_files(pid: int) -> set[str]:
    lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return {line.split(maxsplit=5)[5] for line in lines if len(line.split(maxsplit=5)) == 6}


def test_ingress_and_worker_load_no_openssl_bindings_and_the_ingress_no_websockets(gw: Gateway) -> None:
    body = {"model": "ok", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
    with httpx.Client(timeout=30, headers={"authorization": f"Bearer {KEY}"}) as client:
        assert client.post(f"{gw.base_url}/v1/chat/completions", json=body).status_code == 200
        streamed = client.post(f"{gw.base_url}/v1/chat/completions", json={**body, "stream": True})
        assert streamed.status_code == 200 and b"[DONE]" in streamed.content
    for role, pid in _servers(gw).items():
        files = _mapped_files(pid)
        assert any("libpython" in f or "python3" in f for f in files), f"{role}: no interpreter in its map?"
        assert not [f for f in files if "cryptography/hazmat/bindings" in f], role
        if role == "ingress":
            assert not [f for f in files if "/websockets/" in f], role


def test_ingress_and_worker_run_under_python_oo_in_the_process_the_fleet_started(gw: Gateway) -> None:
    for role, pid in _servers(gw).items():
        assert _interpreter_flags(pid) == ["-O", "-O"], f"{role}: restarted in place (same PID) under -OO"


def test_python_optimize_zero_keeps_the_command_line_as_started() -> None:
    require_redis()
    fleet = Fleet()
    try:
        gw = start_gateway(fleet, CONFIG, key=KEY, env={"TURNOUT_PYTHON_OPTIMIZE": "0"})
        for role, pid in _servers(gw).items():
            assert _interpreter_flags(pid) == [], f"{role}: TURNOUT_PYTHON_OPTIMIZE=0 runs it as started"
    finally:
        fleet.stop_all()
