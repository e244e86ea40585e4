"""Redis coming back empty under a running fleet (restarted without AOF, as a replica promoted
before it had the writes would be): the processes see a new Redis epoch when they resubscribe,
the ingress writes the file's orgs and keys again and every process the file's catalog, so a
valid key is served again without a restart of any process; the warning names the missing AOF."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import httpx
import pytest

from support.gateway import ACME_ORG, BREAKER_OFF, KEY, SIM_PROVIDERS, Gateway
from support.procs import Fleet, require_redis, wait_until

pytestmark = pytest.mark.integration

CONFIG = SIM_PROVIDERS + "models:\n  ok: {{offers: [{{provider: sim-a, model: ok-a}}]}}\n" + BREAKER_OFF + ACME_ORG


@pytest.fixture
def gw() -> Iterator[Gateway]:
    require_redis()
    fleet = Fleet()
    try:
        _, redis_url = fleet.redis(aof=False)  # a restart loses everything
        _, sim_url = fleet.sim()
        config = fleet.workdir / "turnout.yaml"
        config.write_text(CONFIG.format(sim=sim_url, key=KEY))
        env = {"TURNOUT_ALLOW_NO_AOF": "1"}
        fleet.worker(config, redis_url, env=env)
        _, base = fleet.ingress(config, redis_url, env=env)
        yield Gateway(base_url=base, sim_url=sim_url, redis_url=redis_url, fleet=fleet)
    finally:
        fleet.stop_all()


def _status(gw: Gateway) -> int:
    body = {"model": "ok", "messages": [{"role": "user", "content": "hi"}]}
    return httpx.post(
        f"{gw.base_url}/v1/chat/completions", json=body, headers={"authorization": f"Bearer {KEY}"}, timeout=10
    ).status_code


def test_a_valid_key_is_served_again_after_redis_comes_back_empty(gw: Gateway) -> None:
    assert _status(gw) == 200
    redis_proc = next(p for p in gw.fleet.procs if p.name.startswith("redis"))
    redis_proc.stop(signal.SIGKILL)
    gw.fleet.restart(redis_proc)
    back = time.monotonic()
    wait_until(lambda: _status(gw) == 200, 15, "a valid key served after Redis came back empty")
    print(f"\nserved again {time.monotonic() - back:.2f} s after Redis came back empty")
    ingress = next(p for p in gw.fleet.procs if p.name.startswith("ingress"))
    wait_until(lambda: "without its data" in ingress.log(), 5, "the ingress noticing the new epoch")
    assert "runs without AOF" in ingress.log()
    statuses = [_status(gw) for _ in range(5)]
    assert statuses == [200] * 5
