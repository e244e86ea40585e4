"""`turnout healthcheck`: the image's HEALTHCHECK finds the server from its main process's command line."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from turnout_cli.healthcheck import cmd_healthcheck, probe_target


def test_ingress_probes_liveness_on_its_port_and_loopback_for_a_wildcard_bind() -> None:
    argv = ["/opt/turnout/bin/python3", "-OO", "/opt/turnout/bin/turnout", "ingress", "--port", "8081"]
    assert probe_target(argv, {"TURNOUT_HOST": "0.0.0.0"}) == ("http://127.0.0.1:8081/health/liveness", True)
    assert probe_target(["turnout", "ingress"], {"TURNOUT_PORT": "9000"}) == (
        "http://127.0.0.1:9000/health/liveness",
        True,
    )
    assert probe_target(["turnout", "ingress", "--host=::"], {})[0] == "http://[::1]:8080/health/liveness"  # type: ignore[index]


def test_sim_and_worker_probe_their_ports_and_a_worker_without_one_passes() -> None:
    assert probe_target(["turnout", "sim", "--host", "0.0.0.0", "--port", "9100"], {}) == (
        "http://127.0.0.1:9100/",
        False,
    )
    assert probe_target(["turnout", "worker"], {}) == ("http://127.0.0.1:9464/metrics", False)
    assert probe_target(["turnout", "worker"], {"TURNOUT_METRICS_PORT": "0"}) is None


def test_another_command_is_named() -> None:
    with pytest.raises(ValueError, match="none of turnout ingress, worker, sim: 'turnout config check x'"):
        probe_target(["turnout", "config", "check", "x"], {})


class _Answer(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[HTTPServer]:
    httpd = HTTPServer(("127.0.0.1", 0), _Answer)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _cmdline(tmp_path: Path, *words: str) -> Path:
    path = tmp_path / "cmdline"
    path.write_bytes(b"\0".join(word.encode() for word in words) + b"\0")
    return path


def test_exit_codes_follow_the_answer(
    server: HTTPServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    port = str(server.server_address[1])
    assert cmd_healthcheck(_cmdline(tmp_path, "turnout", "ingress", "--port", port), {}) == 0
    monkeypatch.setattr(_Answer, "status", 503)
    assert cmd_healthcheck(_cmdline(tmp_path, "turnout", "ingress", "--port", port), {}) == 1
    assert "HTTP 503" in capsys.readouterr().err
    assert cmd_healthcheck(_cmdline(tmp_path, "turnout", "sim", "--port", port), {}) == 0  # any answer: up
    assert cmd_healthcheck(tmp_path / "missing", {}) == 1
    assert "missing" in capsys.readouterr().err
