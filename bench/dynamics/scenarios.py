"""The seven scenarios: their models, breaker defaults, sizes and measurements.

Owns: `Durations` (full and `--quick` sizes), one coroutine per scenario
returning its figures as a JSON-ready dict, and `SCENARIOS` (id -> Scenario).
Every loop is bounded in time and in count.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from dynamics.calls import Call, chat, fingerprint, max_in_flight, open_loop, per_second, share, statuses
from dynamics.fleet import KEY_TENANT_A, KEY_TENANT_B, PLATFORM_KEY_A, REVOKED_KEY, Gateway, log

NO_HINT_PAUSE_S = 0.1
"""S6: a client's pause after an error that carries no retry hint, in seconds."""
MAX_HINT_S = 60.0
"""S6: longest retry hint a client obeys, in seconds."""
MAX_CALLS = 200_000
"""S6: requests sent by all clients together, at most."""


@dataclass(frozen=True, slots=True)
class Durations:
    """Scenario sizes; seconds unless named otherwise."""

    s1_down_s: int = 20
    s1_after_s: int = 60
    s1_window_s: int = 30
    s1_rate_per_s: float = 5.0
    s2_requests: int = 300
    s3_down_s: int = 60
    s3_after_s: int = 40
    s3_interval_s: float = 4.0
    s4_run_s: int = 60
    s6_clients: int = 200
    s6_run_s: int = 60
    s7_run_s: int = 130
    s7_rate_per_s: float = 2.0
    breaker: dict[str, Any] = field(default_factory=dict)


DURATIONS = {
    "full": Durations(),
    "quick": Durations(
        s1_down_s=6, s1_after_s=20, s1_window_s=10, s2_requests=40, s3_down_s=10, s3_after_s=15,
        s3_interval_s=1.0, s4_run_s=10, s6_clients=50, s6_run_s=20, s7_run_s=25,
        breaker={"cooldown_s": 3, "max_cooldown_s": 10},
    ),
}


@dataclass(frozen=True, slots=True)
class Scenario:
    """A scenario: its models (YAML lines under `models:`), breaker defaults and measurement."""

    name: str
    models: Callable[[Durations], str]
    run: Callable[[Gateway, Durations], Coroutine[Any, Any, dict[str, Any]]]
    breaker: Callable[[Durations], dict[str, Any]] = lambda d: {}


async def s1_heal_share(gw: Gateway, d: Durations) -> dict[str, Any]:
    a_model = f"heal-a~down{d.s1_down_s}s"
    run_s = d.s1_down_s + d.s1_after_s
    async with gw.client() as client:
        calls = await open_loop(lambda: chat(client, "heal"), d.s1_rate_per_s, run_s, grace_s=30)
    t0 = calls[0].sent_s
    a_log = await gw.sim_log(a_model)
    healed_s = float(a_log[0]["t_s"]) + d.s1_down_s if a_log else None
    end_s = t0 + run_s
    window = [c for c in calls if end_s - d.s1_window_s <= c.sent_s < end_s and c.ok]
    after = [c for c in calls if healed_s is not None and c.sent_s >= healed_s and c.ok]
    bins = []
    for start in range(0, d.s1_after_s, 10):
        served = [c for c in after if healed_s is not None and start <= c.sent_s - healed_s < start + 10]
        bins.append(share(sum(c.provider == "sim-a" for c in served), len(served)))
    return {
        "requests": len(calls), "statuses": statuses(calls), "rate_per_s": d.s1_rate_per_s,
        "down_s": d.s1_down_s, "after_s": d.s1_after_s,
        "healed_at_s_after_start": None if healed_s is None else round(healed_s - t0, 2),
        "window_s": d.s1_window_s, "window_served": len(window),
        "a_share_in_window": share(sum(c.provider == "sim-a" for c in window), len(window)),
        "a_share_per_10s_after_heal": bins,
        "a_upstream_calls_after_heal": sum(1 for e in a_log if healed_s is not None and e["t_s"] >= healed_s),
    }


async def s2_random_errors(gw: Gateway, d: Durations) -> dict[str, Any]:
    runs = []
    for percent in (10, 50):
        model = f"rnd{percent}"
        async with gw.client() as client:
            calls = [await chat(client, model) for _ in range(d.s2_requests)]
        upstream = await gw.sim_log(f"rnd{percent}~fail{percent}")
        p = percent / 100
        runs.append({
            "fail_percent": percent, "requests": len(calls), "statuses": statuses(calls),
            "success_share": share(sum(c.ok for c in calls), len(calls)),
            "best_share_for_policy": round(1 - p ** (1 + gw.max_retries), 4),
            "attempts_allowed": 1 + gw.max_retries, "upstream_calls": len(upstream),
            "requests_without_upstream_call": len(calls) - len({e["request_id"] for e in upstream}),
        })
    return {"runs": runs}


async def s3_down_then_heal(gw: Gateway, d: Durations) -> dict[str, Any]:
    primary = f"dh-p~down{d.s3_down_s}s"
    run_s = d.s3_down_s + d.s3_after_s
    async with gw.client() as client:
        calls = await open_loop(lambda: chat(client, "dh"), 1 / d.s3_interval_s, run_s, grace_s=30)
    p_log = await gw.sim_log(primary)
    healed_s = float(p_log[0]["t_s"]) + d.s3_down_s if p_log else None
    served = [e for e in p_log if e["status"] == 200]
    first_client = next((c for c in calls if c.provider == "sim-a"), None)
    return {
        "requests": len(calls), "statuses": statuses(calls), "request_interval_s": d.s3_interval_s,
        "down_s": d.s3_down_s, "after_s": d.s3_after_s,
        "heal_to_first_primary_s": (
            round(float(served[0]["t_s"]) - healed_s, 2) if served and healed_s is not None else None),
        "heal_to_first_primary_response_s": (
            round(first_client.done_s - healed_s, 2) if first_client and healed_s is not None else None),
        "observed_after_heal_s": None if healed_s is None else round(calls[-1].sent_s - healed_s, 2),
        "primary_upstream_calls": len(p_log),
        "primary_upstream_calls_while_down": sum(1 for e in p_log if e["status"] == 503),
    }


async def s4_retry_after_3600(gw: Gateway, d: Durations) -> dict[str, Any]:
    async with gw.client() as client:
        first = await chat(client, "ra")
        calls = await open_loop(lambda: chat(client, "ra"), 1.0, d.s4_run_s, grace_s=30)
    a_log = await gw.sim_log("ra-a~429ra3600")
    first_429 = next((float(e["t_s"]) for e in a_log if e["status"] == 429), None)
    return {
        "first_request": {"status": first.status, "provider": first.provider},
        "requests": len(calls), "statuses": statuses(calls),
        "success_share": share(sum(c.ok for c in calls), len(calls)),
        "providers": {p: sum(c.provider == p for c in calls) for p in ("sim-a", "sim-b")},
        "a_calls_after_first_429": (
            None if first_429 is None else sum(1 for e in a_log if float(e["t_s"]) > first_429)),
        "a_call_offsets_after_first_429_s": [
            round(float(e["t_s"]) - first_429, 2) for e in a_log if first_429 is not None and float(e["t_s"]) > first_429
        ][:20],
        "a_calls_total": len(a_log),
    }


async def s5_tenant_key(gw: Gateway, d: Durations) -> dict[str, Any]:
    async with gw.client(KEY_TENANT_A) as client_a, gw.client(KEY_TENANT_B) as client_b:
        calls_a = [await chat(client_a, "tk") for _ in range(6)]
        calls_b = [await chat(client_b, "tk") for _ in range(10)]
    entries = await gw.sim_log("tk-a")
    return {
        "tenant_a": {"requests": len(calls_a), "statuses": statuses(calls_a)},
        "tenant_b": {"requests": len(calls_b), "statuses": statuses(calls_b),
                     "successes": sum(c.ok for c in calls_b)},
        "upstream_with_revoked_key": sum(1 for e in entries if e["auth_fingerprint"] == fingerprint(REVOKED_KEY)),
        "upstream_with_platform_key": sum(1 for e in entries if e["auth_fingerprint"] == fingerprint(PLATFORM_KEY_A)),
    }


def _herd_failures(d: Durations) -> int:
    return int({**d.breaker}.get("consecutive_failures", 3))


async def s6_recovery_herd(gw: Gateway, d: Durations) -> dict[str, Any]:
    failures = _herd_failures(d)
    model = "herd~" + ",".join(["503"] * failures + ["cap50"])
    async with gw.client(timeout_s=60) as client:
        # Warm-up: one client until the gateway stops calling upstream (breaker open), at most 20 requests.
        warmup, opened = 0, False
        for _ in range(20):
            before = len(await gw.sim_log(model))
            call = await chat(client, "herd")
            warmup += 1
            if call.ok:
                break
            if len(await gw.sim_log(model)) == before:
                opened = True
                break
        log(f"S6 warm-up: {warmup} request(s), breaker open: {opened}")
        end_mono = time.monotonic() + d.s6_run_s
        calls: list[Call] = []

        async def one_client() -> None:
            while time.monotonic() < end_mono and len(calls) < MAX_CALLS:
                call = await chat(client, "herd")
                calls.append(call)
                if call.ok:
                    continue
                pause = call.hint_s if call.hint_s is not None and call.status in (429, 503) else NO_HINT_PAUSE_S
                await asyncio.sleep(max(0.0, min(pause, MAX_HINT_S, end_mono - time.monotonic())))

        tasks = [asyncio.create_task(one_client()) for _ in range(d.s6_clients)]
        _, pending = await asyncio.wait(tasks, timeout=d.s6_run_s + 70)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    entries = await gw.sim_log(model)
    first_ok = next((float(e["t_s"]) for e in entries if e["status"] == 200), None)
    arrivals = [float(e["t_s"]) for e in entries]
    timeline = per_second(arrivals, first_ok, 10) if first_ok is not None else []
    start = min(arrivals) if arrivals else 0.0
    whole = per_second(arrivals, start, int(max(arrivals, default=start) - start) + 1) if arrivals else []
    return {
        "clients": d.s6_clients, "run_s": d.s6_run_s, "warmup_requests": warmup, "breaker_opened": opened,
        "requests": len(calls), "statuses": statuses(calls),
        "first_upstream_success_after_start_s": None if first_ok is None else round(first_ok - start, 2),
        "upstream_calls_per_s_after_first_success": timeline,
        "upstream_200_per_s_after_first_success": per_second(
            [float(e["t_s"]) for e in entries if e["status"] == 200], first_ok, 10) if first_ok is not None else [],
        "peak_upstream_calls_per_s_after_first_success": max(timeline, default=None),
        "peak_upstream_calls_per_s_whole_run": max(whole, default=None),
        "upstream_calls": len(entries),
    }


async def s7_hung_probe(gw: Gateway, d: Durations) -> dict[str, Any]:
    model = "hp~503,503,503,200+120000ms"
    async with gw.client(timeout_s=d.s7_run_s + 30) as client:
        calls = await open_loop(lambda: chat(client, "hung"), d.s7_rate_per_s, d.s7_run_s, grace_s=1)
    now_s = time.time()
    entries = await gw.sim_log(model)
    failed = [e for e in entries if e["status"] == 503]
    trip_s = float(failed[2]["ended_s"] or failed[2]["t_s"]) if len(failed) >= 3 else None
    after = [e for e in entries if trip_s is not None and float(e["t_s"]) >= trip_s]
    return {
        "requests": len(calls), "statuses": statuses(calls), "run_s": d.s7_run_s,
        "tripped_after_start_s": None if trip_s is None else round(trip_s - calls[0].sent_s, 2),
        "max_upstream_in_flight_after_trip": (
            None if trip_s is None else max_in_flight(after, trip_s, min(now_s, trip_s + d.s7_run_s))),
        "upstream_calls_after_trip": len(after),
        "upstream_call_starts_after_trip_s": [round(float(e["t_s"]) - trip_s, 2) for e in after][:20]
        if trip_s is not None else [],
    }


SCENARIOS = {
    "S1": Scenario("heal_share", lambda d: f"""\
  heal:
    offers: [{{provider: sim-a, model: "heal-a~down{d.s1_down_s}s"}}, {{provider: sim-b, model: heal-b}}]""",
                   s1_heal_share),
    "S2": Scenario("random_errors", lambda d: """\
  rnd10: {offers: [{provider: sim-a, model: "rnd10~fail10"}]}
  rnd50: {offers: [{provider: sim-a, model: "rnd50~fail50"}]}""", s2_random_errors),
    "S3": Scenario("down_then_heal", lambda d: f"""\
  dh:
    order: priority
    offers: [{{provider: sim-a, model: "dh-p~down{d.s3_down_s}s"}}, {{provider: sim-b, model: dh-s}}]""",
                   s3_down_then_heal),
    "S4": Scenario("retry_after_3600", lambda d: """\
  ra:
    order: priority
    offers: [{provider: sim-a, model: "ra-a~429ra3600"}, {provider: sim-b, model: ra-b}]""", s4_retry_after_3600),
    "S5": Scenario("tenant_key", lambda d: """\
  tk: {offers: [{provider: sim-a, model: tk-a}]}""", s5_tenant_key),
    "S6": Scenario("recovery_herd", lambda d: f"""\
  herd: {{offers: [{{provider: sim-a, model: "herd~{','.join(['503'] * _herd_failures(d) + ['cap50'])}"}}]}}""",
                   s6_recovery_herd),
    "S7": Scenario("hung_probe", lambda d: """\
  hung: {offers: [{provider: sim-a, model: "hp~503,503,503,200+120000ms"}]}""", s7_hung_probe,
                   breaker=lambda d: {"cooldown_s": 2 if d.s7_run_s < 60 else 5}),
}
