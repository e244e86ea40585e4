"""Recovery that does not wait for traffic (issue #41 item 6): a model's only offer flaps, and the
fleet's active prober finds it healed within `interval_s` plus one request gap, every run.

Compressed timeline of the issue's scenario (down ~36 s, threshold 3, cooldown 10 s): the offer is
down 6 s from its first request, the breaker opens after 3 failures with a 2 s cooldown that
doubles up to 20 s on each failed probe (so client traffic alone would wait up to 20 s after the
heal), the provider's probe is active every 1 s, and a client sends one request every 0.5 s.
Two workers share the one prober lease. Assertions are on the order of events, with generous
time bounds (the file also runs under CPU load: README "Active probes").
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
import redis

from support.gateway import Gateway, start_gateway
from support.procs import Fleet, require_redis

pytestmark = pytest.mark.integration

KEY = "tk-test-active-probe-00001"
DOWN_S = 6.0
INTERVAL_S = 1.0
GAP_S = 0.5
SLACK_S = 1.5
"""Generous room for a loaded machine: process scheduling, the prober's round, the request's own time."""
UPSTREAM = "flap~down6s"

CONFIG = """\
providers:
  sim-a:
    kind: openai_compatible
    base_url: "{sim}/v1"
    api_key: key-a
    probe: {{active: true, interval_s: 1, call: tiny_request}}
models:
  flap: {{offers: [{{provider: sim-a, model: "flap~down6s"}}]}}
policy:
  retry: {{max_retries: 0}}
breaker: {{consecutive_failures: 3, sole_consecutive_failures: 3, run_chance: 0.5, cooldown_s: 2,
          max_cooldown_s: 20}}
orgs:
  acme:
    keys: [{{name: main, key: {key}}}]
"""


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    require_redis()
    fleet = Fleet()
    try:
        yield start_gateway(fleet, CONFIG, workers=2, key=KEY)
    finally:
        fleet.stop_all()


def _reset(gw: Gateway) -> None:
    httpx.delete(f"{gw.sim_url}/sim/log")  # the down window starts again at the next request
    with redis.Redis.from_url(gw.redis_url) as r:
        stale = r.keys("turnout:breaker:*") + r.keys("turnout:probe:*") + r.keys("turnout:ramp:*")
        if stale:
            r.delete(*stale)


def _traffic(gw: Gateway, seconds: float) -> list[tuple[float, int]]:
    """One request every `GAP_S` for `seconds`: (epoch time of the answer, status) each."""
    answers: list[tuple[float, int]] = []
    end = time.monotonic() + seconds
    with httpx.Client(timeout=30) as client:
        while time.monotonic() < end:
            started = time.monotonic()
            response = client.post(
                f"{gw.base_url}/v1/chat/completions",
                headers={"authorization": f"Bearer {KEY}"},
                json={"model": "flap", "messages": [{"role": "user", "content": "hi"}]},
            )
            answers.append((time.time(), response.status_code))
            time.sleep(max(0.0, GAP_S - (time.monotonic() - started)))
    return answers


@pytest.mark.parametrize("run", range(6))
def test_a_flapping_sole_offer_is_back_within_the_probe_interval_and_a_request_gap(gateway: Gateway, run: int) -> None:
    _reset(gateway)
    answers = _traffic(gateway, DOWN_S + 6.0)
    log = gateway.sim_log(UPSTREAM)
    healed_at = float(log[0]["t_s"]) + DOWN_S  # type: ignore[arg-type]
    first_ok = next(at for at, status in answers if status == 200)
    late_s = first_ok - healed_at
    print(f"run {run}: first 200 {late_s:+.2f} s after the heal; upstream calls {len(log)}")
    # 1. the breaker opened: client requests were refused without an upstream call
    assert any(status == 503 for _, status in answers), answers
    # 2. back on it within the probe interval and one request gap of the heal (generous slack)
    assert late_s <= INTERVAL_S + GAP_S + SLACK_S, (late_s, answers)
    # 3. the order of events at the provider: the client's failures, then only active probes while
    #    down (about one per interval), and the first success there was an active probe's
    probes = [e for e in log if str(e["request_id"]).startswith("probe-")]
    before_heal = [e for e in log if float(e["t_s"]) < healed_at]  # type: ignore[arg-type]
    assert [e["status"] for e in before_heal[:3]] == [503, 503, 503]
    assert all(str(e["request_id"]).startswith("probe-") for e in before_heal[3:]), before_heal
    assert 2 <= len([e for e in probes if e in before_heal]) <= int(DOWN_S / INTERVAL_S) + 1
    first_success = next(e for e in log if e["status"] == 200)
    assert str(first_success["request_id"]).startswith("probe-"), first_success
    # 4. once back, it stays back: every later request is served
    assert all(status == 200 for at, status in answers if at > first_ok), answers
