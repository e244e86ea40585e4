"""The shared circuit breaker across four real worker processes (SPEC §5).

A failing target leaves rotation for the whole fleet after three counted
failures; after the cooldown exactly one probe goes to it, whichever worker
takes it; its success brings traffic back.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Iterator

import httpx
import msgspec
import pytest
import redis

from support.gateway import Gateway, start_gateway
from support.procs import Fleet, require_redis
from turnout.core.breaker import BreakerSnapshot

pytestmark = pytest.mark.integration

KEY = "tk-test-breaker-000000001"
COOLDOWN_S = 1.0
PROBE_TTL_S = 4.0

CONFIG = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
  sim-b: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-b}}
models:
  recover:
    order: priority
    offers: [{{provider: sim-a, model: "rec~503,503,503,200+800ms,200"}}, {{provider: sim-b, model: rec-b}}]
  flap:
    order: priority
    offers: [{{provider: sim-a, model: "flap~down4s"}}, {{provider: sim-b, model: flap-b}}]
  lonely:          {{offers: [{{provider: sim-a, model: "lonely~503"}}]}}
  stuck:
    order: priority
    offers: [{{provider: sim-a, model: "stuck~503,503,503,hang,200+600ms,200"}}, {{provider: sim-b, model: stuck-b}}]
policy:
  retry: {{max_retries: 0}}
# Three failures open a target whatever its history (run_chance 0.5), and a closed
# target takes full traffic at once: this module tests the probe mechanics.
breaker: {{consecutive_failures: 3, sole_consecutive_failures: 3, run_chance: 0.5, cooldown_s: {cooldown},
          max_cooldown_s: {cooldown}, probe_ttl_s: {probe_ttl}, slow_start_s: 0}}
orgs:
  acme:
    keys: [{{name: main, key: {key}}}]
"""

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def fleet4() -> Iterator[Gateway]:
    """Redis, simulator, four workers and one ingress sharing breaker state."""
    require_redis()
    fleet = Fleet()
    try:
        yield start_gateway(fleet, CONFIG, workers=4, key=KEY, cooldown=str(COOLDOWN_S), probe_ttl=str(PROBE_TTL_S))
    finally:
        fleet.stop_all()


def _reset(gw: Gateway) -> None:
    httpx.delete(f"{gw.sim_url}/sim/log")
    with redis.Redis.from_url(gw.redis_url) as r:
        stale = r.keys("turnout:breaker:*") + r.keys("turnout:probe:*")
        if stale:
            r.delete(*stale)


def _post(gw: Gateway, model: str) -> httpx.Response:
    return httpx.post(
        f"{gw.base_url}/v1/chat/completions",
        headers={"authorization": f"Bearer {KEY}"},
        json={"model": model, "messages": MESSAGES},
        timeout=30,
    )


async def _burst(gw: Gateway, model: str, count: int) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=count)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        return await asyncio.gather(
            *[
                client.post(
                    f"{gw.base_url}/v1/chat/completions",
                    headers={"authorization": f"Bearer {KEY}"},
                    json={"model": model, "messages": MESSAGES},
                )
                for _ in range(count)
            ]
        )


def _snapshot(gw: Gateway, target: str) -> BreakerSnapshot:
    with redis.Redis.from_url(gw.redis_url) as r:
        data = r.hget(f"turnout:breaker:{target}", "s")
    return msgspec.msgpack.decode(data, type=BreakerSnapshot) if data else BreakerSnapshot()


def test_breaker_opens_after_three_failures_and_skips_the_target(fleet4: Gateway) -> None:
    _reset(fleet4)
    for _ in range(3):
        assert _post(fleet4, "recover").headers["x-turnout-provider"] == "sim-b"
    assert _snapshot(fleet4, "sim-a/rec~503,503,503,200+800ms,200").open
    response = _post(fleet4, "recover")
    assert response.headers["x-turnout-provider"] == "sim-b"
    assert response.headers["x-turnout-attempts"] == "1"  # the open target was skipped, not attempted
    assert len(fleet4.sim_log("rec~503,503,503,200+800ms,200")) == 3


def test_breaker_every_target_open_is_503_with_retry_after_at_the_ingress(fleet4: Gateway) -> None:
    _reset(fleet4)
    for _ in range(3):
        assert _post(fleet4, "lonely").status_code == 502
    started = time.monotonic()
    response = _post(fleet4, "lonely")
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "circuit_open"
    assert 1 <= int(response.headers["retry-after"]) <= 2
    assert time.monotonic() - started < 1.0  # answered at once, not after the cooldown (Retry-After >= 1 s)
    assert len(fleet4.sim_log("lonely~503")) == 3


@pytest.mark.parametrize("trial", range(20))
def test_breaker_half_open_admits_exactly_one_probe_fleet_wide(fleet4: Gateway, trial: int) -> None:
    upstream = "rec~503,503,503,200+800ms,200"
    _reset(fleet4)
    for _ in range(3):
        _post(fleet4, "recover")
    time.sleep(COOLDOWN_S + 0.1)
    responses = asyncio.run(_burst(fleet4, "recover", 200))
    assert all(r.status_code == 200 for r in responses)
    log = fleet4.sim_log(upstream)
    after_trip = log[3:]
    probe = after_trip[0]
    probe_done = float(probe["t_s"]) + 0.8  # type: ignore[arg-type]
    during_probe = [e for e in after_trip if float(e["t_s"]) < probe_done - 0.05]  # type: ignore[arg-type]
    assert len(during_probe) == 1, f"trial {trial}: {len(during_probe)} attempts reached the half-open target"


def test_breaker_flap_fallback_serves_outage_and_traffic_returns(fleet4: Gateway) -> None:
    upstream = "flap~down4s"
    _reset(fleet4)
    providers = []
    started = time.monotonic()
    while time.monotonic() - started < 7.0:
        response = _post(fleet4, "flap")
        assert response.status_code == 200
        providers.append((time.monotonic() - started, response.headers["x-turnout-provider"]))
        time.sleep(0.2)
    log = fleet4.sim_log(upstream)
    failures = [e for e in log if e["status"] == 503]
    # threshold failures, then at most one probe per cooldown during the 4 s outage
    assert 3 <= len(failures) <= 3 + int(4 / COOLDOWN_S) + 1
    # traffic is back on the primary within one cooldown (+ request spacing) of its recovery
    back = [t for t, p in providers if p == "sim-a" and t > 4.0]
    assert back and back[0] <= 4.0 + COOLDOWN_S + 0.6
    assert all(p == "sim-a" for t, p in providers if t > back[0])


def test_breaker_probe_permit_of_a_killed_worker_expires_then_one_new_probe(fleet4: Gateway) -> None:
    """Runs last in this module: it kills the fleet's workers and starts a fresh one."""
    upstream = "stuck~503,503,503,hang,200+600ms,200"
    _reset(fleet4)
    for _ in range(3):
        _post(fleet4, "stuck")
    time.sleep(COOLDOWN_S + 0.1)

    def probe_request() -> None:
        try:
            httpx.post(
                f"{fleet4.base_url}/v1/chat/completions",
                headers={"authorization": f"Bearer {KEY}"},
                json={"model": "stuck", "messages": MESSAGES},
                timeout=1.0,
            )
        except httpx.TimeoutException:
            pass

    probing = threading.Thread(target=probe_request)
    probing.start()
    deadline = time.monotonic() + 5
    while len(fleet4.sim_log(upstream)) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(fleet4.sim_log(upstream)) == 4  # the probe is hanging on the target
    probe_at = time.monotonic()
    workers = [p for p in fleet4.fleet.procs if p.name.startswith("worker")]
    for worker in workers:
        worker.stop(signal.SIGKILL)
    probing.join()
    config = fleet4.fleet.workdir / "turnout.yaml"
    fleet4.fleet.worker(config, fleet4.redis_url, name="worker-fresh")

    while time.monotonic() - probe_at < PROBE_TTL_S - 0.5:  # permit still held by the dead worker
        assert _post(fleet4, "stuck").headers["x-turnout-provider"] == "sim-b"
        time.sleep(0.2)
    assert len(fleet4.sim_log(upstream)) == 4
    time.sleep(max(0.0, PROBE_TTL_S + 0.2 - (time.monotonic() - probe_at)))
    responses = asyncio.run(_burst(fleet4, "stuck", 20))
    assert all(r.status_code == 200 for r in responses)
    after = fleet4.sim_log(upstream)[4:]
    probe_t = float(after[0]["t_s"])  # type: ignore[arg-type]
    assert after[0]["status"] == 200
    assert len([e for e in after if float(e["t_s"]) < probe_t + 0.55]) == 1  # type: ignore[arg-type]
    assert _post(fleet4, "stuck").headers["x-turnout-provider"] == "sim-a"  # closed again
