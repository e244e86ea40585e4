"""`turnout dev` with your own configuration never keeps the demo org's published key.

Runs `turnout dev` as a user would, in a scratch directory: first with the
demo catalog, then with its own file — once with the Redis `turnout dev`
starts (one data directory per configuration), once with an external Redis
(`--redis-url`) that the demo run had used, and once with the production
`turnout ingress` on that Redis; and the demo again after it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from support.procs import Fleet, free_port, http_ok, require_redis, wait_until
from turnout_cli.dev import DEMO_KEY

pytestmark = pytest.mark.integration

OWN_KEY = "tk-own-config-key-0001"
OWN_CONFIG = f"""\
providers:
  mine: {{kind: openai_compatible, base_url: "http://127.0.0.1:9/v1", api_key: k}}
models:
  mine: {{offers: [{{provider: mine, model: m}}]}}
orgs:
  me:
    keys: [{{name: me, key: {OWN_KEY}}}]
"""


def _dev(cwd: Path, *args: str, stop: signal.Signals = signal.SIGTERM, sigint_ignored: bool = False) -> Iterator[str]:
    """`turnout dev` running in `cwd` (its base URL), stopped with `stop` on exit; `sigint_ignored`
    starts it as a shell starts a background job (`scripts/dev &` in a script): SIGINT ignored."""
    port = free_port()
    env = {**os.environ, "TURNOUT_METRICS_PORT": "0"}
    env.pop("TURNOUT_REDIS_URL", None)
    env.pop("TURNOUT_CONFIG", None)
    log = open(cwd / f"dev-{port}.log", "wb")
    argv = [sys.executable, "-m", "turnout_cli.main", "dev", "--port", str(port), "--sim-port", str(free_port()), *args]
    if sigint_ignored:  # what a shell does: the ignored disposition survives exec
        argv = ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *argv]
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: http_ok(f"{base}/health/readiness"), 60, "turnout dev")
        yield base
    finally:
        children = _children(proc.pid)
        proc.send_signal(stop)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # it did not stop: leave nothing running behind the failure
            for pid in [*children, proc.pid]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            raise
        finally:
            log.close()
        wait_until(lambda: not any(Path(f"/proc/{c}").exists() for c in children), 30, "turnout dev's processes gone")


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _models(base: str, key: str) -> int:
    return httpx.get(f"{base}/v1/models", headers={"authorization": f"Bearer {key}"}, timeout=5).status_code


def test_dev_started_with_sigint_ignored_stops_on_sigint_with_its_processes(tmp_path: Path) -> None:
    require_redis()
    for base in _dev(tmp_path, stop=signal.SIGINT, sigint_ignored=True):
        assert _models(base, DEMO_KEY) == 200
    # _dev waited for the exit and for Redis, the simulator, the ingress and the worker to be gone


def test_dev_own_config_gets_its_own_redis_without_the_demo_key(tmp_path: Path) -> None:
    require_redis()
    (tmp_path / "mine.yaml").write_text(OWN_CONFIG)
    for base in _dev(tmp_path):
        assert _models(base, DEMO_KEY) == 200
    for base in _dev(tmp_path, "--config", "mine.yaml"):
        assert _models(base, DEMO_KEY) == 401
        assert _models(base, OWN_KEY) == 200
    dirs = sorted(p.name for p in (tmp_path / ".turnout").iterdir() if p.name.startswith("redis-"))
    assert dirs[0] == "redis-demo" and dirs[1].startswith("redis-mine-") and len(dirs) == 2
    for base in _dev(tmp_path):  # the demo still works afterwards
        assert _models(base, DEMO_KEY) == 200


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[tuple[Fleet, str]]:
    """A Redis of its own (the fleet that runs it, its URL), with `mine.yaml` written in `tmp_path`."""
    require_redis()
    (tmp_path / "mine.yaml").write_text(OWN_CONFIG)
    fleet = Fleet()
    try:
        yield fleet, fleet.redis()[1]
    finally:
        fleet.stop_all()


def test_dev_own_config_removes_the_demo_org_from_a_shared_redis(tmp_path: Path, shared: tuple[Fleet, str]) -> None:
    _, redis_url = shared
    for base in _dev(tmp_path, "--redis-url", redis_url):
        assert _models(base, DEMO_KEY) == 200
    for base in _dev(tmp_path, "--redis-url", redis_url, "--config", "mine.yaml"):
        assert _models(base, DEMO_KEY) == 401
        assert _models(base, OWN_KEY) == 200
    logs = "".join(p.read_text(errors="replace") for p in tmp_path.glob("dev-*.log"))
    assert "tenancy: org demo: removed the whole org (every key, API-created ones too)" in logs
    for base in _dev(tmp_path, "--redis-url", redis_url):  # and the demo creates it again
        assert _models(base, DEMO_KEY) == 200


def test_dev_own_config_after_the_old_shared_data_dir_keeps_its_data_but_not_the_demo_key(tmp_path: Path) -> None:
    require_redis()
    (tmp_path / "mine.yaml").write_text(OWN_CONFIG)
    for base in _dev(tmp_path):
        assert _models(base, DEMO_KEY) == 200
    (tmp_path / ".turnout" / "redis-demo").rename(tmp_path / ".turnout" / "redis")  # the earlier single data dir
    for base in _dev(tmp_path, "--config", "mine.yaml"):
        assert _models(base, DEMO_KEY) == 401
        assert _models(base, OWN_KEY) == 200


def _listed(base: str, key: str) -> list[str]:
    answer = httpx.get(f"{base}/v1/models", headers={"authorization": f"Bearer {key}"}, timeout=5)
    return sorted(m["id"] for m in answer.json()["data"])


def test_the_production_ingress_after_the_demo_on_one_redis_refuses_the_demo_key(
    tmp_path: Path, shared: tuple[Fleet, str]
) -> None:
    fleet, redis_url = shared
    for base in _dev(tmp_path, "--redis-url", redis_url):
        assert _models(base, DEMO_KEY) == 200
    proc, base = fleet.ingress(tmp_path / "mine.yaml", redis_url)  # `turnout ingress --config mine.yaml`
    assert _models(base, DEMO_KEY) == 401
    assert _listed(base, OWN_KEY) == ["mine"]  # the demo's models went with it
    assert "tenancy: org demo: removed the whole org (every key, API-created ones too)" in proc.log()


def test_the_demo_after_a_production_ingress_on_one_redis_starts_without_a_traceback(
    tmp_path: Path, shared: tuple[Fleet, str]
) -> None:
    fleet, redis_url = shared
    sim_port = str(free_port())  # the same demo file each time, as `scripts/dev` writes it
    for base in _dev(tmp_path, "--redis-url", redis_url, "--sim-port", sim_port):
        assert _models(base, DEMO_KEY) == 200
    proc, _ = fleet.ingress(tmp_path / "mine.yaml", redis_url)
    proc.stop()
    for base in _dev(tmp_path, "--redis-url", redis_url, "--sim-port", sim_port):
        assert _models(base, OWN_KEY) == 401
        assert _listed(base, DEMO_KEY) == ["demo-claude", "demo-embed", "demo-gpt", "demo-small"]
        answer = httpx.post(
            f"{base}/v1/chat/completions",
            headers={"authorization": f"Bearer {DEMO_KEY}"},
            json={"model": "demo-gpt", "messages": [{"role": "user", "content": "hi"}]},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
    logs = "".join(p.read_text(errors="replace") for p in tmp_path.glob("dev-*.log"))
    assert "Traceback" not in logs
