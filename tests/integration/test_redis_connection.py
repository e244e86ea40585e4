"""How processes reach their Redis: a Unix socket (`unix:///path/redis.sock`, README "Configuration"), and a
URL that cannot work refused at start.

Real processes: a `redis-server` listening on a Unix socket only (no TCP
port), the simulator, a worker started before that Redis and an ingress,
both given the `unix://` URL; the `openai` SDK as the client.

- The worker waiting for its Redis names the socket path in its log line,
  not `localhost:6379` (arq's settings keep a default host beside the path).
- Once Redis answers, a chat completion and a stream are served: the
  ingress (redis-py) and the worker (arq) both reach Redis by the socket.
- A malformed `--redis-url` stops `turnout worker` and `turnout ingress`
  with exit 2 and one line naming the fault, the password masked, and no
  traceback; so does a well-formed one naming a database the server does
  not have (it was diagnosed as a refused `CONFIG GET`, then retried forever).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import openai
import pytest

from support.gateway import one_model_config
from support.procs import Fleet, require_redis, wait_until

pytestmark = pytest.mark.integration

KEY = "tk-test-unix-socket-0001"
CONFIG = one_model_config("unix-ok")


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    require_redis()
    fleet = Fleet()
    try:
        yield fleet
    finally:
        fleet.stop_all()


def test_a_fleet_on_a_unix_socket_redis_serves_and_names_the_socket(fleet: Fleet) -> None:
    redis_proc, redis_url = fleet.redis(unix=True)
    socket_path = redis_url.removeprefix("unix://")
    _, sim = fleet.sim()
    config = fleet.workdir / "turnout.yaml"
    config.write_text(CONFIG.format(sim=sim, key=KEY))
    redis_proc.stop()
    worker = fleet.worker(config, redis_url, name="worker-0", ready=False)
    wait_until(lambda: "unreachable at start (" in worker.log(), 30, "the worker waiting for its Redis")
    assert f"Redis at {socket_path} unreachable at start" in worker.log(), worker.log()[-2000:]
    assert "localhost:6379" not in worker.log()
    fleet.restart(redis_proc)
    wait_until(lambda: "worker ready" in worker.log(), 30, "the worker ready once Redis answers")
    _, base = fleet.ingress(config, redis_url)
    with openai.OpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0, timeout=30) as client:
        reply = client.chat.completions.create(model="ok", messages=[{"role": "user", "content": "hi"}], max_tokens=5)
        assert reply.choices[0].message.content, "served through the queue over the socket"
        chunks = list(
            client.chat.completions.create(
                model="ok", messages=[{"role": "user", "content": "hi"}], max_tokens=5, stream=True
            )
        )
    assert chunks and any(c.choices and c.choices[0].delta.content for c in chunks)
    assert "Traceback" not in worker.log()


def _refused_start(fleet: Fleet, command: str, url: str) -> subprocess.CompletedProcess[str]:
    """`turnout <command>` run to its end against `url` (it must stop at start)."""
    config = fleet.workdir / "turnout.yaml"
    config.write_text(CONFIG.format(sim="http://127.0.0.1:9", key=KEY))
    return subprocess.run(
        [sys.executable, "-m", "turnout_cli.main", command, "--config", str(config), "--redis-url", url],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("command", ["worker", "ingress"])
def test_a_malformed_redis_url_stops_the_process_with_one_line(fleet: Fleet, command: str) -> None:
    done = _refused_start(fleet, command, "redis://:s3cret@127.0.0.1:notaport/0")
    assert done.returncode == 2, done.stderr
    assert "argument --redis-url: not a Redis URL (" in done.stderr
    assert "its port is not a number from 1 to 65535; got 'redis://***@127.0.0.1:notaport/0'" in done.stderr
    assert "s3cret" not in done.stderr + done.stdout and "Traceback" not in done.stderr


@pytest.mark.parametrize("command", ["worker", "ingress"])
def test_a_database_the_redis_does_not_have_stops_the_process_naming_it(fleet: Fleet, command: str) -> None:
    _, redis_url = fleet.redis()
    done = _refused_start(fleet, command, redis_url.rsplit("/", 1)[0] + "/99999")  # databases are 0-15
    assert done.returncode == 2, done.stderr
    assert "turnout: configuration error: the Redis URL's database 99999 is out of range for this Redis" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout and "could not be checked" not in done.stderr + done.stdout
