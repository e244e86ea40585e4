"""Processes started before their Redis wait for it, then serve.

Real processes: a `redis-server` started and stopped again (so its port and
data directory are known), the simulator, then Turnout pointed at the
stopped Redis.

- `turnout worker` (`turnout_worker.connect`) must stay up past arq's own
  five tries, one log line per failed try and no traceback; once Redis is
  back (same port) it must become ready and answer a request sent through
  a real ingress with the `openai` SDK. A SIGTERM during the wait must stop
  it cleanly (exit 0).
- `turnout ingress` listens without Redis; until it has read the keys once,
  a key gets `503 redis_unavailable` with `Retry-After` (it may be valid),
  not `401`; no key at all is still `401`. Once Redis is back, the same key
  is served.
- Both check Redis's persistence once it answers: a Redis that comes back
  without AOF (not allowed) stops them with exit code 3, as it would have
  at start.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from support.gateway import one_model_config
from support.procs import Fleet, Proc, http_ok, require_redis, wait_until

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


def _worker_before_redis(fleet: Fleet, *, aof: bool = True) -> tuple[Proc, Proc, Path, str]:
    """(the stopped Redis, a worker started against it, the configuration, the Redis URL)."""
    redis_proc, redis_url = fleet.redis(aof=aof)
    _, sim = fleet.sim()
    config = fleet.workdir / "turnout.yaml"
    config.write_text(CONFIG.format(sim=sim, key=KEY))
    redis_proc.stop()
    worker = fleet.worker(config, redis_url, name="worker-0", ready=False)
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


def _listening(url: str) -> bool:
    try:
        httpx.get(url, timeout=2)
    except httpx.TransportError:
        return False
    return True


def test_an_ingress_started_before_its_redis_answers_503_for_keys_until_it_has_read_them(fleet: Fleet) -> None:
    redis_proc, worker, config, redis_url = _worker_before_redis(fleet)
    _, base = fleet.ingress(config, redis_url, ready=False)
    wait_until(lambda: _listening(f"{base}/health/readiness"), 60, "the ingress listening without Redis")
    assert not http_ok(f"{base}/health/readiness"), "not ready without Redis"
    with openai.OpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0, timeout=30) as client:
        with pytest.raises(openai.APIStatusError) as info:
            client.chat.completions.create(model="ok", messages=[{"role": "user", "content": "hi"}])
    answer = info.value.response
    assert answer.status_code == 503 and answer.headers["retry-after"] == "1", answer.text
    assert answer.json()["error"]["code"] == "redis_unavailable" and answer.headers["x-request-id"]
    no_key = httpx.post(f"{base}/v1/chat/completions", json={"model": "ok", "messages": []}, timeout=10)
    assert no_key.status_code == 401, "no key at all is never valid"
    fleet.restart(redis_proc)
    wait_until(lambda: http_ok(f"{base}/health/readiness"), 60, "the ingress ready once Redis answers")
    wait_until(lambda: "worker ready" in worker.log(), 60, "the worker ready once Redis answers")
    with openai.OpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0, timeout=30) as client:
        # the keys are read on the ingress's reconnect, a moment after readiness at most
        wait_until(lambda: _served(client), 60, "the key served once the ingress has read the keys")


def _served(client: openai.OpenAI) -> bool:
    try:
        reply = client.chat.completions.create(model="ok", messages=[{"role": "user", "content": "hi"}])
    except openai.APIStatusError as exc:
        assert exc.status_code == 503, exc.response.text  # never a 401 for this valid key
        return False
    return bool(reply.choices[0].message.content)


def test_processes_started_before_a_redis_without_aof_stop_once_it_answers(fleet: Fleet) -> None:
    redis_proc, worker, config, redis_url = _worker_before_redis(fleet, aof=False)
    ingress, base = fleet.ingress(config, redis_url, ready=False)
    wait_until(lambda: _listening(f"{base}/health/liveness"), 60, "the ingress listening")
    wait_until(lambda: WAITING in worker.log(), 30, "the worker waiting for Redis")
    fleet.restart(redis_proc)  # the same command: appendonly no
    for proc in (worker, ingress):
        wait_until(lambda p=proc: not p.alive(), 60, f"{proc.name} stopped by the persistence check")  # type: ignore[misc]
        log = proc.log()
        assert proc.popen.returncode == 3, log[-2000:]
        assert "refusing to start: Redis runs without AOF" in log and "Traceback" not in log, log[-2000:]
