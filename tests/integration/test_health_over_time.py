"""Provider health over time on a real fleet (SPEC §5), with the official `openai` SDK.

Two workers and one ingress share Redis. The breaker's thresholds are the
defaults; only its time scale is a fifth of the default (window 4 s, cooldown
1 s doubling to 4 s, slow start 2 s, probe permit 2 s), and so are the
scenarios' durations and request spacing, so each takes seconds.
The full-scale figures (default time scale) come from `bench/health_dynamics.py`.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import msgspec
import openai
import pytest
import redis

from support.gateway import Gateway, start_gateway
from support.procs import Fleet, require_redis
from support.tenancy import fp
from turnout.core.breaker import BreakerSnapshot

pytestmark = pytest.mark.integration

KEY_A = "tk-test-health-orga-000001"
KEY_B = "tk-test-health-orgb-000001"
REVOKED = "sk-sim-revoked-orga-00000000001"  # the simulator answers 401 to it
MESSAGES: list[Any] = [{"role": "user", "content": "hi"}]

CONFIG = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
  sim-b: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-b}}
models:
  heal:
    offers: [{{provider: sim-a, model: "heal-a~down3s"}}, {{provider: sim-b, model: heal-b}}]
  random10:        {{offers: [{{provider: sim-a, model: "r10~fail10"}}]}}
  random50:        {{offers: [{{provider: sim-a, model: "r50~fail50"}}]}}
  primary:
    order: priority
    offers: [{{provider: sim-a, model: "pri-a~down4s"}}, {{provider: sim-b, model: pri-b}}]
  resting:
    order: priority
    offers: [{{provider: sim-a, model: "rest-a~429ra3600"}}, {{provider: sim-b, model: rest-b}}]
  resting-only:    {{offers: [{{provider: sim-a, model: "resto~429ra3600"}}]}}
  shared:          {{offers: [{{provider: sim-a, model: shared-a}}]}}
  hung:
    order: priority
    offers: [{{provider: sim-a, model: "hung-a~503,503,503,503,503,503,200+6000ms"}}, {{provider: sim-b, model: hung-b}}]
breaker: {{window: 4, cooldown_s: 1, max_cooldown_s: 4, slow_start_s: 2, probe_ttl_s: 2}}
orgs:
  orga:
    provider_keys: {{sim-a: ${{ORGA_BYOK}}}}
    keys: [{{name: main, key: {key_a}}}]
  orgb:
    keys: [{{name: main, key: {key_b}}}]
"""


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    require_redis()
    fleet = Fleet()
    try:
        from cryptography.fernet import Fernet

        env = {"TURNOUT_SECRET_KEY": Fernet.generate_key().decode(), "ORGA_BYOK": REVOKED, "TURNOUT_METRICS_PORT": "0"}
        yield start_gateway(fleet, CONFIG, workers=2, env=env, key_a=KEY_A, key_b=KEY_B)
    finally:
        fleet.stop_all()


def _client(gw: Gateway, key: str = KEY_B) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.base_url}/v1", api_key=key, max_retries=0, timeout=30)


def _served_by(client: openai.OpenAI, model: str) -> tuple[int, str | None]:
    """(HTTP status, x-turnout-provider) of one request."""
    try:
        raw = client.chat.completions.with_raw_response.create(model=model, messages=MESSAGES)
        return raw.http_response.status_code, raw.headers.get("x-turnout-provider")
    except openai.APIStatusError as exc:
        return exc.status_code, None


def test_a_healed_provider_gets_its_traffic_back(gw: Gateway) -> None:
    """A fails for 3 s then heals; in the second half of the 12 s after
    healing it serves a fair share again (the issue's 60 s window at a fifth
    of the time scale; issue: 0 of 2,100 requests over 7 minutes)."""
    client = _client(gw)
    first = time.monotonic()
    served: list[tuple[float, str | None]] = []
    while time.monotonic() - first < 3.0 + 12.0:  # A is down from its first request: 3 s
        status, provider = _served_by(client, "heal")
        assert status == 200
        served.append((time.monotonic() - first, provider))
        time.sleep(0.02)
    late = Counter(p for t, p in served if t >= 3.0 + 6.0)
    share_a = late["sim-a"] / sum(late.values())
    assert share_a >= 0.30, late


@pytest.mark.parametrize(("model", "floor"), [("random10", 0.98), ("random50", 0.65)])
def test_random_errors_on_the_only_offer_do_not_become_an_outage(gw: Gateway, model: str, floor: float) -> None:
    """One offer failing at random (the simulator's seeded 10 % / 50 %): the
    breaker stays closed, so the retry serves what can be served. The policy's
    best is 1 - p² (two attempts): 99 % and 75 %."""
    client = _client(gw)
    statuses = Counter(_served_by(client, model)[0] for _ in range(300))
    assert statuses[200] / 300 >= floor, statuses
    assert statuses[503] == 0, statuses  # never `circuit_open`


def test_a_primary_down_then_healthy_is_used_again_soon_after_healing(gw: Gateway) -> None:
    """Down 4 s, then healthy, one request every 0.8 s (the issue's 20 s and
    4 s at a fifth of the scale): back on the primary within 6 s of healing."""
    client = _client(gw)
    started = time.monotonic()
    back_at = None
    while time.monotonic() - started < 12:
        status, provider = _served_by(client, "primary")
        assert status == 200
        if provider == "sim-a" and time.monotonic() - started > 1.0:
            back_at = time.monotonic() - started
            break
        time.sleep(0.8)
    assert back_at is not None
    assert back_at < 4.0 + 6.0


def test_retry_after_is_kept_fleet_wide(gw: Gateway) -> None:
    """`429 Retry-After: 3600` from A: no worker calls A again while B serves."""
    client = _client(gw)
    assert _served_by(client, "resting") == (200, "sim-b")
    for _ in range(30):
        assert _served_by(client, "resting") == (200, "sim-b")
    assert len(gw.sim_log("rest-a~429ra3600")) == 1
    assert len(gw.sim_log("rest-b")) == 31


def test_every_target_resting_answers_503_with_a_jittered_retry_after(gw: Gateway) -> None:
    client = _client(gw)
    first = client.chat.completions.with_raw_response
    with pytest.raises(openai.RateLimitError):
        first.create(model="resting-only", messages=MESSAGES)
    seen = set()
    for _ in range(8):
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(model="resting-only", messages=MESSAGES)
        assert caught.value.status_code == 503
        assert caught.value.body["code"] == "circuit_open"  # type: ignore[index]
        retry_after = int(caught.value.response.headers["retry-after"])
        assert 299 <= retry_after <= 601  # the 3,600 s hint capped at 300 s, jittered over one more wait
        seen.add(retry_after)
    assert len(seen) > 1
    assert len(gw.sim_log("resto~429ra3600")) == 1


def test_one_tenants_bad_key_never_closes_the_model_for_others(gw: Gateway) -> None:
    """Org A's own key is revoked: its failures count against its credential
    only (after a few, its key is no longer sent: its requests go straight
    to the credential fallback); org B, on the platform key, is served every
    time and the shared breaker never opens."""
    a, b = _client(gw, KEY_A), _client(gw, KEY_B)
    for _ in range(6):
        raw = a.chat.completions.with_raw_response.create(model="shared", messages=MESSAGES)
        assert raw.headers.get("x-turnout-byok-fallback") == "1"
    assert [_served_by(b, "shared") for _ in range(10)] == [(200, "sim-a")] * 10
    revoked = [e for e in gw.sim_log("shared-a") if e.get("auth_fingerprint") == fp(REVOKED)]
    assert 3 <= len(revoked) < 6  # three failures open the credential; at most a probe after its cooldown
    with redis.Redis.from_url(gw.redis_url) as r:
        target = r.hget("turnout:breaker:sim-a/shared-a", "s")
        credential = r.hget("turnout:breaker:credential:orga:sim-a", "s")
    assert target is not None and credential is not None
    assert msgspec.msgpack.decode(target, type=BreakerSnapshot).failures == 0.0
    assert msgspec.msgpack.decode(credential, type=BreakerSnapshot).trips >= 1  # the credential opened


async def _concurrent(gw: Gateway, model: str, count: int, spread_s: float) -> list[int]:
    async with openai.AsyncOpenAI(base_url=f"{gw.base_url}/v1", api_key=KEY_B, max_retries=0, timeout=30) as c:

        async def one(i: int) -> int:
            await asyncio.sleep(spread_s * i / count)
            try:
                await c.chat.completions.create(model=model, messages=MESSAGES)
                return 200
            except openai.APIStatusError as exc:
                return exc.status_code

        return list(await asyncio.gather(*(one(i) for i in range(count))))


def test_a_hung_probe_is_the_only_probe(gw: Gateway) -> None:
    """The probe hangs 6 s, three times its permit's life: the permit is
    renewed, so no second probe reaches A meanwhile; B serves everyone."""
    client = _client(gw)
    for _ in range(3):
        _served_by(client, "hung")  # three requests, six failures: A opens
    time.sleep(1.3)  # past the cooldown: the next request probes A
    statuses = asyncio.run(_concurrent(gw, "hung", 40, 5.0))
    assert statuses == [200] * 40
    calls = gw.sim_log("hung-a~503,503,503,503,503,503,200+6000ms")
    probes = calls[6:]
    assert len(probes) == 1, [(c.get("received_s"), c.get("status")) for c in probes]
