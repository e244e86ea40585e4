"""Nothing accepted is lost: killed workers, drained workers, Redis restarts,
client retries with an Idempotency-Key (real processes; each test prints its figure)."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator

import httpx
import pytest

from support.gateway import ACME_ORG, BREAKER_OFF, Gateway, start_gateway
from support.procs import Fleet, require_redis, wait_until

pytestmark = pytest.mark.integration

KEY = "tk-test-reliable-00000001"
KEY_SHORT = "tk-test-short-budget-0001"
KEY_ONE = "tk-test-one-at-a-time-001"
LEASE_S = 2.0

CONFIG = (
    """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
models:
  slow:     {{offers: [{{provider: sim-a, model: "slow~200+2000ms"}}]}}
  slow-dl:  {{offers: [{{provider: sim-a, model: "sdl~200+1200ms"}}]}}
  drain:    {{offers: [{{provider: sim-a, model: "drain~200+2000ms"}}]}}
  idem:     {{offers: [{{provider: sim-a, model: "idem~200+500ms"}}]}}
  quick:    {{offers: [{{provider: sim-a, model: quick}}]}}
  idem-bad: {{offers: [{{provider: sim-a, model: idem-bad}}]}}
  idem-left: {{offers: [{{provider: sim-a, model: "idem-left~200+800ms"}}]}}
  held:     {{offers: [{{provider: sim-a, model: "held~200+3000ms"}}]}}
gateway: {{job_lease_s: {lease}, max_queue_depth: 1000}}
"""
    + BREAKER_OFF
    + ACME_ORG
    + """      - {{name: short, key: {key_short}, settings: {{policy: {{budget: {{max_total_latency_ms: 1500}}}}}}}}
      - {{name: one, key: {key_one}, settings: {{limits: {{max_concurrent: 1}}}}}}
"""
)


@pytest.fixture(scope="module")
def fleet2() -> Iterator[Gateway]:
    """Redis (AOF), simulator, two workers with a short job lease, one ingress."""
    require_redis()
    fleet = Fleet()
    try:
        yield start_gateway(fleet, CONFIG, workers=2, key=KEY, key_short=KEY_SHORT, key_one=KEY_ONE, lease=str(LEASE_S))
    finally:
        fleet.stop_all()


def _body(model: str) -> dict[str, object]:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


async def _many(gw: Gateway, model: str, count: int, key: str = KEY, **headers: str) -> list[httpx.Response]:
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=count), timeout=60) as client:
        return await asyncio.gather(
            *[
                client.post(
                    f"{gw.base_url}/v1/chat/completions",
                    json=_body(model),
                    headers={"authorization": f"Bearer {key}", **headers},
                )
                for _ in range(count)
            ]
        )


def _workers(gw: Gateway) -> list:  # type: ignore[type-arg]
    return [p for p in gw.fleet.procs if p.name.startswith("worker") and p.alive()]


def _replace_worker(gw: Gateway, dead_name: str) -> None:
    config = gw.fleet.workdir / "turnout.yaml"
    gw.fleet.worker(config, gw.redis_url, name=f"{dead_name}-again-{int(time.time() * 1000)}")


def test_sigkill_worker_with_200_jobs_in_flight_loses_none(fleet2: Gateway) -> None:
    async def scenario() -> list[httpx.Response]:
        burst = asyncio.ensure_future(_many(fleet2, "slow", 200))
        await asyncio.sleep(0.8)
        victim = _workers(fleet2)[0]
        victim.stop(signal.SIGKILL)
        return await burst

    started = time.monotonic()
    responses = asyncio.run(scenario())
    statuses = [r.status_code for r in responses]
    attempts = len(fleet2.sim_log("slow~200+2000ms"))
    print(
        f"\nSIGKILL with 200 in flight: {statuses.count(200)}/200 answered 200, "
        f"{attempts - 200} duplicate upstream calls, {time.monotonic() - started:.1f} s"
    )
    assert statuses == [200] * 200
    assert 200 <= attempts <= 400  # at most one duplicate per job of the dead worker
    _replace_worker(fleet2, "worker-killed")


def test_rerun_after_client_deadline_makes_no_upstream_call(fleet2: Gateway) -> None:
    async def scenario() -> tuple[float, list[httpx.Response]]:
        sent = time.time()
        burst = asyncio.ensure_future(_many(fleet2, "slow-dl", 40, key=KEY_SHORT))
        await asyncio.sleep(0.4)
        for worker in _workers(fleet2):
            worker.stop(signal.SIGKILL)
        responses = await burst
        return sent, responses

    sent, responses = asyncio.run(scenario())
    _replace_worker(fleet2, "worker-a")
    _replace_worker(fleet2, "worker-b")
    time.sleep(LEASE_S + 2.0)  # leases expire, the new workers' scans find the orphaned jobs
    log = fleet2.sim_log("sdl~200+1200ms")
    late = [e for e in log if float(e["t_s"]) > sent + 1.5 + 0.05]  # type: ignore[arg-type]
    print(
        f"\nclients past their deadline: {len(responses)} answered "
        f"{sorted({r.status_code for r in responses})}, upstream calls after the deadline: {len(late)}"
    )
    assert all(r.status_code in (503, 504) for r in responses)
    assert late == []


def test_sigterm_drains_in_flight_jobs_in_place(fleet2: Gateway) -> None:
    async def scenario() -> list[httpx.Response]:
        burst = asyncio.ensure_future(_many(fleet2, "drain", 30))
        await asyncio.sleep(0.6)
        for worker in _workers(fleet2):
            worker.popen.send_signal(signal.SIGTERM)
        return await burst

    responses = asyncio.run(scenario())
    attempts = len(fleet2.sim_log("drain~200+2000ms"))
    print(
        f"\nSIGTERM with 30 in flight: {sum(r.status_code == 200 for r in responses)}/30 finished in place, "
        f"{attempts} upstream calls"
    )
    assert [r.status_code for r in responses] == [200] * 30
    assert attempts == 30  # finished in place: none re-queued and re-run
    for worker in list(_workers(fleet2)):
        worker.popen.wait(timeout=30)
    _replace_worker(fleet2, "worker-drained-a")
    _replace_worker(fleet2, "worker-drained-b")


def test_idempotency_key_twenty_concurrent_retries_make_one_upstream_call(fleet2: Gateway) -> None:
    responses = asyncio.run(_many(fleet2, "idem", 20, **{"idempotency-key": "order-42"}))
    assert [r.status_code for r in responses] == [200] * 20
    assert len({r.content for r in responses}) == 1
    assert len(fleet2.sim_log("idem~200+500ms")) == 1
    assert sum(r.headers.get("x-turnout-idempotent-replay") == "1" for r in responses) == 19
    other = httpx.post(
        f"{fleet2.base_url}/v1/chat/completions",
        json={**_body("idem"), "max_tokens": 9},
        headers={"authorization": f"Bearer {KEY}", "idempotency-key": "order-42"},
        timeout=30,
    )
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "idempotency_key_reused"


def test_idempotency_key_is_scoped_to_the_gateway_key(fleet2: Gateway) -> None:
    def post(key: str, **extra: object) -> httpx.Response:
        return httpx.post(
            f"{fleet2.base_url}/v1/chat/completions",
            json={**_body("quick"), **extra},
            timeout=30,
            headers={"authorization": f"Bearer {key}", "idempotency-key": "order-43"},
        )

    first = post(KEY)
    same_body_other_key = post(KEY_SHORT)
    other_body_other_key = post(KEY_SHORT, max_tokens=9)  # the short key's own first use binds it, not KEY's
    assert [first.status_code, same_body_other_key.status_code] == [200, 200]
    assert "x-turnout-idempotent-replay" not in same_body_other_key.headers
    assert other_body_other_key.status_code == 409  # reused within the short key's own scope
    assert post(KEY).headers.get("x-turnout-idempotent-replay") == "1"


def test_a_keyed_job_outlives_its_client_so_the_retry_gets_its_answer(fleet2: Gateway) -> None:
    """The client times out; its retry with the same key and body must get the first job's
    answer, not wait out the budget for a job that was cancelled when the client left."""
    headers = {"authorization": f"Bearer {KEY}", "anthropic-version": "2023-06-01"}
    for done, route in enumerate(("/v1/chat/completions", "/v1/messages"), start=1):
        keyed = {**headers, "idempotency-key": f"left-{done}"}
        body = _body("idem-left")
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{fleet2.base_url}{route}", json=body, headers=keyed, timeout=httpx.Timeout(30, read=0.3))
        started = time.monotonic()
        retry = httpx.post(f"{fleet2.base_url}{route}", json=body, headers=keyed, timeout=30)
        assert retry.status_code == 200, retry.text
        assert retry.headers.get("x-turnout-idempotent-replay") == "1"
        assert time.monotonic() - started < 10  # the first job's answer, not the budget's end
        calls = fleet2.sim_log("idem-left~200+800ms")
        assert len(calls) == done and calls[-1]["end"] == "complete", calls  # one call each, run to its end


def test_a_keyed_job_that_outlives_its_client_keeps_its_concurrency_slot_until_it_ends(fleet2: Gateway) -> None:
    """Leaving early must not free the slot of a job still running upstream (`max_concurrent: 1`)."""
    headers = {"authorization": f"Bearer {KEY_ONE}"}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            f"{fleet2.base_url}/v1/chat/completions",
            json=_body("held"),
            headers={**headers, "idempotency-key": "held-1"},
            timeout=httpx.Timeout(30, read=0.3),
        )
    meanwhile = httpx.post(f"{fleet2.base_url}/v1/chat/completions", json=_body("quick"), headers=headers, timeout=30)
    assert meanwhile.status_code == 429, meanwhile.text  # the 3 s job upstream still holds the one slot
    assert meanwhile.json()["error"]["code"] == "rate_limit_exceeded"
    wait_until(
        lambda: (
            httpx.post(
                f"{fleet2.base_url}/v1/chat/completions", json=_body("quick"), headers=headers, timeout=30
            ).status_code
            == 200
        ),
        30,
        "the slot to be freed when the job ended",
    )
    assert [e["end"] for e in fleet2.sim_log("held~200+3000ms")] == ["complete"]


def test_idempotency_key_refused_when_repeated_or_out_of_bounds_before_any_upstream_call(fleet2: Gateway) -> None:
    def post(*keys: str, route: str = "/v1/chat/completions") -> httpx.Response:
        headers = [("authorization", f"Bearer {KEY}"), ("anthropic-version", "2023-06-01")]
        headers += [("idempotency-key", key) for key in keys]
        body = {**_body("idem-bad"), "max_tokens": 5}
        return httpx.post(f"{fleet2.base_url}{route}", json=body, headers=headers, timeout=30)

    twice = post("order-44", "order-45")
    assert twice.status_code == 400
    assert twice.json()["error"] == {
        "message": "Send one `Idempotency-Key` header; this request has 2.",
        "type": "invalid_request_error",
        "param": "Idempotency-Key",
        "code": "invalid_request",
    }
    assert post("order-44", "order-44").status_code == 400  # even alike: one header per request
    too_long = post("k" * 256)
    assert (too_long.status_code, too_long.json()["error"]["param"]) == (400, "Idempotency-Key")
    on_messages = post("order-46", "order-47", route="/v1/messages")
    assert on_messages.status_code == 400
    assert on_messages.json()["error"]["type"] == "invalid_request_error"
    assert "Send one `Idempotency-Key` header" in on_messages.json()["error"]["message"]
    assert fleet2.sim_log("idem-bad") == []  # nothing was attempted
    assert post("order-44").status_code == 200  # the key was not bound by the refused requests


def test_redis_down_answers_503_fast_and_service_resumes(fleet2: Gateway) -> None:
    redis_proc = next(p for p in fleet2.fleet.procs if p.name.startswith("redis"))
    redis_proc.stop(signal.SIGTERM)
    slowest = 0.0
    statuses = []
    outage_until = time.monotonic() + 3.0
    while time.monotonic() < outage_until:
        started = time.monotonic()
        response = httpx.post(
            f"{fleet2.base_url}/v1/chat/completions",
            json=_body("quick"),
            headers={"authorization": f"Bearer {KEY}"},
            timeout=10,
        )
        slowest = max(slowest, time.monotonic() - started)
        statuses.append(response.status_code)
        if response.status_code == 503:
            assert response.headers["retry-after"]
        time.sleep(0.1)
    fleet2.fleet.restart(redis_proc)
    wait_until(
        lambda: (
            httpx.post(
                f"{fleet2.base_url}/v1/chat/completions",
                json=_body("quick"),
                headers={"authorization": f"Bearer {KEY}"},
                timeout=10,
            ).status_code
            == 200
        ),
        20,
        "service after Redis restart",
    )
    print(f"\nRedis down 3 s: {len(statuses)} requests, statuses {sorted(set(statuses))}, slowest {slowest:.2f} s")
    assert set(statuses) == {503}
    assert slowest < 1.0
