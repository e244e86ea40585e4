"""A worker started before its Redis waits for it, then serves (`turnout_worker.connect`).

Real processes: a `redis-server` started and stopped again (so its port and
data directory are known), the simulator, then `turnout worker` pointed at
the stopped Redis. The worker must stay up past arq's own five tries, one
log line per failed try and no traceback; once Redis is back (same port) it
must become ready and answer a request sent through a real ingress with the
`openai` SDK. A SIGTERM during the wait must stop it cleanly (exit 0).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from support.gateway import one_model_config
from support.procs import Fleet, Proc, require_redis, wait_until

pytestmark = pytest.mark.integration

KEY = "tk-test-worker-start-001"
CONFIG = one_model_config("worker-start-ok")
WAITING = "unreachable at start ("  # the worker's own line (the persistence check says "unreachable at start;")


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    require_redis()
    fleet = Fleet()
    try:
        yield fleet
    finally:
        fleet.stop_all()


def _worker_before_redis(fleet: Fleet) -> tuple[Proc, Proc, Path, str]:
    """(the stopped Redis, a worker started against it, the configuration, the Redis URL)."""
    redis_proc, redis_url = fleet.redis()
    _, sim = fleet.sim()
    config = fleet.workdir / "turnout.yaml"
    config.write_text(CONFIG.format(sim=sim, key=KEY))
    redis_proc.stop()
    argv = [sys.executable, "-m", "turnout_cli.main", "worker", "--config", str(config), "--redis-url", redis_url]
    worker = fleet.spawn("worker-0", argv)
    return redis_proc, worker, config, redis_url


def test_a_worker_started_before_its_redis_waits_then_serves(fleet: Fleet) -> None:
    redis_proc, worker, config, redis_url = _worker_before_redis(fleet)
    wait_until(lambda: worker.log().count(WAITING) >= 6, 60, "six failed tries (arq alone gives up after five)")
    assert worker.alive(), worker.log()[-2000:]
    fleet.restart(redis_proc)
    wait_until(lambda: "worker ready" in worker.log(), 30, "the worker ready once Redis answers")
    log = worker.log()
    assert "answered after" in log and "Traceback" not in log, log[-2000:]
    _, base = fleet.ingress(config, redis_url)
    with openai.OpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0, timeout=30) as client:
        reply = client.chat.completions.create(model="ok", messages=[{"role": "user", "content": "hi"}], max_tokens=5)
    assert reply.choices[0].message.content, "served by the worker that waited"


def test_a_worker_waiting_for_redis_stops_cleanly_on_sigterm(fleet: Fleet) -> None:
    _, worker, _, _ = _worker_before_redis(fleet)
    wait_until(lambda: WAITING in worker.log(), 30, "the worker waiting for Redis")
    assert worker.stop(grace_s=10) == 0, worker.log()[-2000:]
    assert "Traceback" not in worker.log()
