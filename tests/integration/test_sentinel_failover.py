"""A Redis primary failing over under load (issue 41, item 5): the fleet follows its sentinels.

Its own fleet per case: a primary, its replica and three sentinels (`support.sentinels`,
`down-after-milliseconds` 1000), the simulator, one worker and one ingress, both given the
`redis+sentinel://` URL. The official openai SDK sends ~50 requests/s of 1 s jobs for a bounded
time; the primary is SIGKILLed in the middle. Counted per case (printed): answers by status and
code, accepted jobs lost (503 `job_lost`: the job was queued, then the promoted replica did not
have it), the time from the kill until a request sent after it is served, and the enqueue's cost
(`WAIT` against `SET` alone, and the p50 of sequential requests before the load).

Asserted: every request gets an answer before its client timeout (no hang); every 503 carries
Retry-After; requests are served again within a generous bound; with `WAIT` on
(`TURNOUT_ENQUEUE_WAIT_REPLICAS=1`) no accepted job is lost. With `WAIT` off the loss is reported,
not asserted: asynchronous replication may drop the last writes.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import httpx2
import openai
import pytest
import redis

from support.gateway import ACME_ORG, BREAKER_OFF
from support.procs import Fleet, require_redis
from support.sentinels import SentinelGroup, start_sentinel_group

pytestmark = pytest.mark.integration

KEY = "tk-test-sentinel-000001"
RATE_PER_S = 50
BEFORE_KILL_S = 4.0
AFTER_KILL_S = 12.0
CLIENT_TIMEOUT_S = 40.0
RECOVERY_BOUND_S = 30.0

CONFIG = (
    """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
models:
  paid: {{offers: [{{provider: sim-a, model: "paid~200+1000ms"}}]}}
  quick: {{offers: [{{provider: sim-a, model: "quick~200"}}]}}
policy:
  retry: {{max_retries: 0}}
  budget: {{max_total_latency_ms: 30000}}
gateway: {{max_queue_depth: 5000}}
"""
    + BREAKER_OFF
    + ACME_ORG
)


@dataclass
class Case:
    fleet: Fleet
    group: SentinelGroup
    base_url: str
    wait_on: bool


@dataclass
class Outcome:
    sent_s: float
    done_s: float
    status: int
    code: str | None = None
    retry_after: str | None = None


@pytest.fixture(params=[True, False], ids=["wait-on", "wait-off"])
def case(request: pytest.FixtureRequest) -> Iterator[Case]:
    require_redis()
    fleet = Fleet()
    try:
        group = start_sentinel_group(fleet)
        _, sim_url = fleet.sim()
        config = fleet.workdir / "turnout.yaml"
        config.write_text(CONFIG.format(sim=sim_url, key=KEY))
        env = {"TURNOUT_ENQUEUE_WAIT_REPLICAS": "1" if request.param else "0", "TURNOUT_ENQUEUE_WAIT_MS": "250"}
        fleet.worker(config, group.url, env=env)
        _, base = fleet.ingress(config, group.url, env=env)
        yield Case(fleet, group, base, request.param)
    finally:
        fleet.stop_all()


def _wait_cost_ms(group: SentinelGroup, n: int = 200) -> tuple[float, float]:
    """p50 of `SET` alone and of `SET` + `WAIT 1 250` in one round trip, on the primary (ms)."""
    alone, waited = [], []
    with redis.Redis(port=group.primary_port) as client:
        for i in range(n):
            started = time.perf_counter()
            client.set(f"cost:{i}", "x")
            alone.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            with client.pipeline(transaction=False) as pipe:
                pipe.set(f"cost:{i}", "y")
                pipe.execute_command("WAIT", 1, 250)
                assert pipe.execute()[1] == 1
            waited.append((time.perf_counter() - started) * 1000)
    return statistics.median(alone), statistics.median(waited)


def _sequential_p50_ms(base_url: str, n: int = 40) -> float:
    body = {"model": "quick", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
    took = []
    with httpx.Client(headers={"authorization": f"Bearer {KEY}"}, timeout=10) as client:
        for _ in range(n):
            started = time.perf_counter()
            assert client.post(f"{base_url}/v1/chat/completions", json=body).status_code == 200
            took.append((time.perf_counter() - started) * 1000)
    return statistics.median(took[5:])  # the first few warm the connections


async def _one(client: openai.AsyncOpenAI, start: float) -> Outcome:
    sent = time.monotonic() - start
    try:
        await client.chat.completions.create(model="paid", messages=[{"role": "user", "content": "hi"}], max_tokens=3)
    except openai.APIStatusError as exc:
        code = exc.body.get("code") if isinstance(exc.body, dict) else None
        return Outcome(sent, time.monotonic() - start, exc.status_code, code, exc.response.headers.get("retry-after"))
    except openai.APIConnectionError as exc:  # a timeout included: a hang, asserted against
        return Outcome(sent, time.monotonic() - start, 0, f"{type(exc).__name__}: {exc.__cause__!r}"[:120])
    return Outcome(sent, time.monotonic() - start, 200)


def _probe_until_served(base_url: str, bound_s: float, found: list[float]) -> None:
    """From now, one quick request every 50 ms (its own thread and connection, not the load's
    event loop) until one is served; appends the seconds that took to `found` (nothing past `bound_s`)."""
    body = {"model": "quick", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
    started = time.monotonic()
    with httpx.Client(headers={"authorization": f"Bearer {KEY}"}, timeout=5) as client:
        while time.monotonic() - started < bound_s:
            try:
                if client.post(f"{base_url}/v1/chat/completions", json=body).status_code == 200:
                    found.append(time.monotonic() - started)
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)


async def _load(case: Case, recovered: list[float]) -> tuple[list[Outcome], float]:
    """~`RATE_PER_S` requests/s for `BEFORE_KILL_S` + `AFTER_KILL_S`; the primary killed between.
    Returns every outcome and the kill's time (seconds from the start)."""
    client = openai.AsyncOpenAI(
        base_url=f"{case.base_url}/v1",
        api_key=KEY,
        max_retries=0,
        timeout=CLIENT_TIMEOUT_S,
        # idle connections dropped before the server's 5 s keep-alive ends: no reuse racing its close
        http_client=openai.DefaultAsyncHttpxClient(
            limits=httpx2.Limits(max_connections=1000, max_keepalive_connections=100, keepalive_expiry=2.0)
        ),
    )
    start = time.monotonic()
    tasks: list[asyncio.Task[Outcome]] = []
    killed_at = -1.0
    probe: threading.Thread | None = None
    total = int((BEFORE_KILL_S + AFTER_KILL_S) * RATE_PER_S)
    for i in range(total):
        due = start + i / RATE_PER_S
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        if killed_at < 0 and i >= BEFORE_KILL_S * RATE_PER_S:
            assert case.group.current_primary_port() == case.group.primary_port, "no failover before the kill"
            case.group.primary.popen.kill()  # SIGKILL: no shutdown, no last replication
            killed_at = time.monotonic() - start
            probe = threading.Thread(target=_probe_until_served, args=(case.base_url, RECOVERY_BOUND_S, recovered))
            probe.start()
        tasks.append(asyncio.create_task(_one(client, start)))
    async with asyncio.timeout(CLIENT_TIMEOUT_S + 10):
        outcomes = await asyncio.gather(*tasks)
    await client.close()
    if probe is not None:
        await asyncio.to_thread(probe.join)
    return outcomes, killed_at


def test_the_fleet_follows_a_failover_and_counts_what_it_lost(case: Case) -> None:
    set_ms, wait_ms = _wait_cost_ms(case.group)
    p50_ms = _sequential_p50_ms(case.base_url)
    recovered: list[float] = []
    outcomes, killed_at = asyncio.run(_load(case, recovered))
    case.group.wait_for_failover(30)  # the sentinels did promote the replica
    by_kind = Counter((o.status, o.code) for o in outcomes)
    lost = by_kind[(503, "job_lost")]
    recover_s = recovered[0] if recovered else None
    last_refused = max((o.sent_s for o in outcomes if o.status != 200), default=killed_at)
    rate = len(outcomes) / max(o.sent_s for o in outcomes)
    print(
        f"\n[WAIT {'on' if case.wait_on else 'off'}] {len(outcomes)} requests at {rate:.0f}/s, kill at "
        f"{killed_at:.1f} s: {dict(by_kind)}; accepted jobs lost: {lost}; requests served again "
        f"{recover_s if recover_s is None else round(recover_s, 2)} s after the kill (a probe every 50 ms; "
        f"the last refused load request was sent {last_refused - killed_at:.2f} s after it); "
        f"SET p50 {set_ms:.3f} ms, SET+WAIT 1 p50 {wait_ms:.3f} ms; sequential queued request p50 {p50_ms:.1f} ms"
    )
    assert not [o for o in outcomes if o.status == 0], "every request answered before its client timeout"
    assert all(o.retry_after for o in outcomes if o.status == 503), "every 503 says when to retry"
    assert recover_s is not None and recover_s <= RECOVERY_BOUND_S, "served again within the bound"
    assert by_kind[(200, None)] > 0.5 * len(outcomes)
    if case.wait_on:
        assert lost == 0, "with WAIT on, no accepted job is lost"
