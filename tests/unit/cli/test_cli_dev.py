"""`turnout dev`: the demo catalogs agree, a redis-server that dies at start is named at once, ports are
checked, the banner names every metrics URL, one stack per data directory."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from turnout.config import parse_config
from turnout_cli.dev import DEMO_CONFIG, DEMO_KEY, _banner, _wait_redis
from turnout_cli.main import build_parser

ROOT = Path(__file__).resolve().parents[3]


def test_the_procfile_demo_catalog_is_turnout_devs() -> None:
    dev = parse_config(DEMO_CONFIG.format(sim_port=9100, key=DEMO_KEY), env={})
    procfile = parse_config((ROOT / "infra" / "procfile" / "turnout.yaml").read_text(), env={})
    assert (procfile.raw.models, procfile.raw.providers, procfile.raw.orgs, procfile.raw.egress) == (
        dev.raw.models,
        dev.raw.providers,
        dev.raw.orgs,
        dev.raw.egress,
    )


def test_the_procfile_keeps_redis_data_out_of_the_shared_tmp() -> None:
    redis_line = next(line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith("redis:"))
    assert "/tmp" not in redis_line and "--appendonly yes" in redis_line


def test_a_redis_server_that_exits_at_start_is_named_without_waiting() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing answers there
    with subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"]) as server:
        server.wait(timeout=30)
        problem = _wait_redis(f"redis://127.0.0.1:{port}/0", 600, server)
    assert problem is not None and "exited at start (exit code 3)" in problem


@pytest.mark.parametrize("value", ["99999", "0", "-1", "abc", ""])
def test_a_port_out_of_range_is_refused_not_wrapped(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        build_parser().parse_args(["ingress", "--port", value])
    assert caught.value.code == 2
    assert f"argument --port: a port is a whole number from 1 to 65535, got {value!r}" in capsys.readouterr().err


def test_a_bad_turnout_port_is_refused_naming_the_option(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TURNOUT_PORT", "99999")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["ingress"])
    assert "got '99999'" in capsys.readouterr().err
    monkeypatch.setenv("TURNOUT_PORT", "8090")
    assert build_parser().parse_args(["ingress"]).port == 8090


def test_the_banner_names_the_ingress_and_every_worker_metrics_url() -> None:
    text = _banner("http://127.0.0.1:8080", DEMO_KEY, True, [9464, 9465])
    assert "http://127.0.0.1:8080/metrics (ingress)" in text
    assert "workers: http://127.0.0.1:9464/metrics, http://127.0.0.1:9465/metrics" in text
    assert "workers: off" in _banner("http://127.0.0.1:8080", DEMO_KEY, True, [])
    assert "dashboard: http://127.0.0.1:8080/ui (log in with an admin key: the one above" in text


def test_a_redis_url_of_yours_is_shown_without_its_password() -> None:
    from turnout_cli.dev import _shown_url

    assert _shown_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
    assert _shown_url("redis://:s3cret@10.0.0.5:6379/1") == "redis://:***@10.0.0.5:6379/1"
    assert _shown_url("rediss://app:s3cret@cache.internal:6380/0") == "rediss://app:***@cache.internal:6380/0"


def test_dev_workers_metrics_ports_skip_a_port_another_process_holds() -> None:
    from turnout_cli.dev import worker_metrics_ports

    free = iter([40001, 40002])
    held = {9465}
    assert worker_metrics_ports(None, 3, lambda: next(free), lambda p: p not in held) == [9464, 40001, 9466]
    assert worker_metrics_ports("9500", 2, lambda: 1, lambda p: False) == [9500, 9501]  # set: taken as is
    assert worker_metrics_ports("0", 2, lambda: 1, lambda p: True) == []  # metrics off


def test_busy_ports_name_each_port_taken_and_the_option_that_moves_it() -> None:
    from turnout_cli.dev import busy_ports

    taken = {(8080, "127.0.0.1"), (9100, "127.0.0.1")}

    def available(port: int, host: str) -> bool:
        return (port, host) not in taken

    assert busy_ports("127.0.0.1", 8080, 9100, available) == [
        "port 8080 on 127.0.0.1 is in use by another process: choose the ingress's port with --port",
        "port 9100 on 127.0.0.1 is in use by another process: choose the simulator's port with --sim-port",
    ]
    assert busy_ports("127.0.0.1", 8080, None, available) == [  # no simulator started: its port is not checked
        "port 8080 on 127.0.0.1 is in use by another process: choose the ingress's port with --port"
    ]
    assert busy_ports("127.0.0.1", 8081, 9101, available) == []


def test_dev_refuses_a_port_another_process_listens_on_before_starting_anything(tmp_path: Path) -> None:
    """Another process answering on the ingress's port must not pass for the stack: nothing
    starts, no banner, the port and `--port` are named, exit 1."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            sim_port = free.getsockname()[1]  # closed again: free
        done = subprocess.run(
            [sys.executable, "-m", "turnout_cli.main", "dev", "--port", str(port), "--sim-port", str(sim_port)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    assert f"port {port} on 127.0.0.1 is in use by another process: choose the ingress's port with --port" in (
        done.stderr
    )
    assert "Turnout is up" not in done.stdout and "redis" not in done.stdout  # nothing was started


@pytest.mark.parametrize("role", ["ingress", "worker"])
def test_a_bad_configuration_is_refused_before_redis_is_asked(role: str, tmp_path: Path) -> None:
    """A broken file is the only complaint (exit 2), even with no Redis to answer: the
    persistence check, which would warn that Redis is unreachable, never runs."""
    broken = tmp_path / "turnout.yaml"
    broken.write_text("providers: [\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: no Redis there
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "turnout_cli.main",
            role,
            "--config",
            str(broken),
            "--redis-url",
            f"redis://127.0.0.1:{port}/0",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert f"turnout: configuration error: {broken}: not valid YAML" in done.stderr
    assert "redis" not in done.stderr.lower() and "persistence" not in done.stderr.lower()


def test_one_port_for_both_the_ingress_and_the_simulator_is_named_before_anything_starts() -> None:
    from turnout_cli.dev import busy_ports

    assert busy_ports("127.0.0.1", 18110, 18110, lambda port, host: True) == [
        "--port and --sim-port are both 18110: the ingress and the simulator need a port each"
    ]


@pytest.mark.parametrize("value", ["-1", "0", "65", "two"])
def test_a_worker_count_out_of_range_is_refused(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["dev", "--workers", value])
    assert f"argument --workers: a number of workers is a whole number from 1 to 64, got {value!r}" in (
        capsys.readouterr().err
    )
    assert build_parser().parse_args(["dev", "--workers", "4"]).workers == 4


@pytest.mark.parametrize("command", ["ingress", "dev", "sim"])
def test_a_listen_host_that_does_not_resolve_is_named_before_the_server_starts(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        build_parser().parse_args([command, "--host", "no-such-host.invalid"])
    assert caught.value.code == 2
    assert "argument --host: 'no-such-host.invalid' is no address to listen on (" in capsys.readouterr().err
    for good in ("127.0.0.1", "0.0.0.0", "::1", "localhost"):
        assert build_parser().parse_args([command, "--host", good]).host == good


def test_a_stack_lock_is_refused_to_a_second_holder_naming_the_first_until_released(tmp_path: Path) -> None:
    from turnout_cli.dev_lock import StackBusy, hold

    first = hold(tmp_path / "redis-demo", "the demo stack")
    with pytest.raises(StackBusy, match=rf"another `turnout dev` \(pid {os.getpid()}\) is running the demo stack;"):
        hold(tmp_path / "redis-demo", "the demo stack")
    hold(tmp_path / "redis-other", "another").close()  # another configuration's stack is its own
    first.close()
    hold(tmp_path / "redis-demo", "the demo stack").close()  # released with its holder


def test_a_second_demo_stack_in_one_directory_is_refused_before_starting_anything(tmp_path: Path) -> None:
    """Two demo stacks from one directory would share one Redis data directory and one demo.yaml."""
    from turnout_cli.dev_lock import hold

    (tmp_path / ".turnout").mkdir()
    ports = []
    for _ in range(2):
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            ports.append(free.getsockname()[1])
    with hold(tmp_path / ".turnout" / "redis-demo", "the demo stack"):
        done = subprocess.run(
            [sys.executable, "-m", "turnout_cli.main", "dev", "--port", str(ports[0]), "--sim-port", str(ports[1])],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    assert f"turnout dev: another `turnout dev` (pid {os.getpid()}) is running the demo stack" in done.stderr
    assert "redis" not in done.stdout and not (tmp_path / ".turnout" / "demo.yaml").exists()
