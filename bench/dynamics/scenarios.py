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

import openai

from dynamics.calls import (
    Call,
    chat,
    fingerprint,
    max_in_flight,
    open_loop,
    peak_per_window,
    per_second,
    share,
    statuses,
)
from dynamics.fleet import KEY_TENANT_A, KEY_TENANT_B, PLATFORM_KEY_A, REVOKED_KEY, Gateway, log
from turnout.core.breaker import BreakerSettings, BreakerSnapshot, ramp_share

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
        s1_down_s=6,
        s1_after_s=20,
        s1_window_s=10,
        s2_requests=40,
        s3_down_s=10,
        s3_after_s=15,
        s3_interval_s=1.0,
        s4_run_s=10,
        s6_clients=50,
        s6_run_s=20,
        s7_run_s=25,
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
        "requests": len(calls),
        "statuses": statuses(calls),
        "rate_per_s": d.s1_rate_per_s,
        "down_s": d.s1_down_s,
        "after_s": d.s1_after_s,
        "healed_at_s_after_start": None if healed_s is None else round(healed_s - t0, 2),
        "window_s": d.s1_window_s,
        "window_served": len(window),
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
        runs.append(
            {
                "fail_percent": percent,
                "requests": len(calls),
                "statuses": statuses(calls),
                "success_share": share(sum(c.ok for c in calls), len(calls)),
                "best_share_for_policy": round(1 - p ** (1 + gw.max_retries), 4),
                "attempts_allowed": 1 + gw.max_retries,
                "upstream_calls": len(upstream),
                "requests_without_upstream_call": len(calls) - len({e["request_id"] for e in upstream}),
                "run_s": round(calls[-1].done_s - calls[0].sent_s, 2),
            }
        )
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
        "requests": len(calls),
        "statuses": statuses(calls),
        "request_interval_s": d.s3_interval_s,
        "down_s": d.s3_down_s,
        "after_s": d.s3_after_s,
        "heal_to_first_primary_s": (
            round(float(served[0]["t_s"]) - healed_s, 2) if served and healed_s is not None else None
        ),
        "heal_to_first_primary_response_s": (
            round(first_client.done_s - healed_s, 2) if first_client and healed_s is not None else None
        ),
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
        "requests": len(calls),
        "statuses": statuses(calls),
        "success_share": share(sum(c.ok for c in calls), len(calls)),
        "providers": {p: sum(c.provider == p for c in calls) for p in ("sim-a", "sim-b")},
        "a_calls_after_first_429": (
            None if first_429 is None else sum(1 for e in a_log if float(e["t_s"]) > first_429)
        ),
        "a_call_offsets_after_first_429_s": [
            round(float(e["t_s"]) - first_429, 2)
            for e in a_log
            if first_429 is not None and float(e["t_s"]) > first_429
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
        "tenant_b": {"requests": len(calls_b), "statuses": statuses(calls_b), "successes": sum(c.ok for c in calls_b)},
        "upstream_with_revoked_key": sum(1 for e in entries if e["auth_fingerprint"] == fingerprint(REVOKED_KEY)),
        "upstream_with_platform_key": sum(1 for e in entries if e["auth_fingerprint"] == fingerprint(PLATFORM_KEY_A)),
    }


OPEN_FAILURES = 40
"""S6, S7: the 503 steps ahead of the healthy behaviour: more than any trip rule needs
(a sole target's run or rate rule included); what the gateway leaves is drained."""
HERD_MODEL = "herd~" + ",".join(["503"] * OPEN_FAILURES + ["cap50"])
HUNG_MODEL = "hp~" + ",".join(["503"] * OPEN_FAILURES + ["200+120000ms"])


@dataclass(frozen=True, slots=True)
class Trip:
    """How a warm-up opened the breaker of a sole target.

    Attributes:
        requests: gateway requests sent by the warm-up.
        opened: True once a request reached no upstream (the breaker is open).
        failures_used: the 503 steps the gateway consumed.
        drained: the 503 steps the harness then used up itself.
        at_s: epoch seconds when the last gateway call ended (the trip).
    """

    requests: int
    opened: bool
    failures_used: int
    drained: int
    at_s: float | None


async def trip_and_drain(gw: Gateway, client: openai.AsyncOpenAI, model: str, upstream: str) -> Trip:
    """One client sends `model` until a request reaches no upstream (at most 2 x OPEN_FAILURES requests),
    then the remaining 503 steps of `upstream` are drained, so the next upstream call (the probe)
    meets the healthy behaviour."""
    requests, opened = 0, False
    for _ in range(2 * OPEN_FAILURES):
        before = len(await gw.sim_log(upstream))
        call = await chat(client, model)
        requests += 1
        if call.ok:
            break
        if len(await gw.sim_log(upstream)) == before:
            opened = True
            break
    entries = await gw.sim_log(upstream)
    used = sum(1 for e in entries if e["status"] == 503)
    drained = await gw.sim_consume(upstream, max(0, OPEN_FAILURES - used)) if opened else []
    last = entries[-1] if entries else None
    at_s = None if last is None else float(last["ended_s"] or last["t_s"])
    log(
        f"{model}: warm-up {requests} request(s), breaker open: {opened}, {used} failure(s) used, "
        f"{len(drained)} drained"
    )
    return Trip(requests=requests, opened=opened, failures_used=used, drained=len(drained), at_s=at_s)


def gateway_calls(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The log entries the gateway sent (platform key of sim-a), not the harness's drain calls."""
    return [e for e in entries if e["auth_fingerprint"] == fingerprint(PLATFORM_KEY_A)]


async def s6_recovery_herd(gw: Gateway, d: Durations) -> dict[str, Any]:
    async with gw.client(timeout_s=60) as client:
        trip = await trip_and_drain(gw, client, "herd", HERD_MODEL)
        end_mono, herd_start_s = time.monotonic() + d.s6_run_s, time.time()
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
    entries = gateway_calls(await gw.sim_log(HERD_MODEL))
    first_ok = next((float(e["t_s"]) for e in entries if e["status"] == 200), None)
    arrivals = [float(e["t_s"]) for e in entries]
    offered = [] if first_ok is None else per_second([c.sent_s for c in calls], first_ok, 10)
    # The configured ramp: the slow-start share (default breaker settings and this
    # scenario's overrides) at the middle of each second after the close, times
    # the requests the clients offered in that second.
    settings = BreakerSettings(**{k: v for k, v in d.breaker.items() if k in BreakerSettings.__struct_fields__})
    closed = BreakerSnapshot(closed_at_s=first_ok or 0.0)
    ramp = [round(ramp_share(closed, (first_ok or 0.0) + i + 0.5, settings) * n, 1) for i, n in enumerate(offered)]
    timeline = [] if first_ok is None else per_second(arrivals, first_ok, 10)
    return {
        "clients": d.s6_clients,
        "run_s": d.s6_run_s,
        "warmup_requests": trip.requests,
        "breaker_opened": trip.opened,
        "failures_before_open": trip.failures_used,
        "requests": len(calls),
        "statuses": statuses(calls),
        "first_upstream_success_after_herd_start_s": None if first_ok is None else round(first_ok - herd_start_s, 2),
        "upstream_calls_per_s_after_first_success": timeline,
        "requests_offered_per_s_after_first_success": offered,
        "configured_ramp_calls_per_s": ramp,
        "calls_over_ramp_first_5_s": [round(c / r, 2) if r else None for c, r in zip(timeline[:5], ramp[:5])],
        "upstream_200_per_s_after_first_success": []
        if first_ok is None
        else per_second([float(e["t_s"]) for e in entries if e["status"] == 200], first_ok, 10),
        "peak_upstream_calls_in_1s_after_first_success": (
            None if first_ok is None else peak_per_window(arrivals, first_ok, first_ok + 10)
        ),
        "peak_upstream_calls_in_1s_whole_run": peak_per_window(arrivals, herd_start_s, float("inf")),
        "upstream_calls_during_herd": sum(1 for t in arrivals if t >= herd_start_s),
    }


async def s7_hung_probe(gw: Gateway, d: Durations) -> dict[str, Any]:
    async with gw.client(timeout_s=d.s7_run_s + 30) as client:
        trip = await trip_and_drain(gw, client, "hung", HUNG_MODEL)
        calls = await open_loop(lambda: chat(client, "hung"), d.s7_rate_per_s, d.s7_run_s, grace_s=1)
    now_s = time.time()
    trip_s = trip.at_s if trip.opened else None
    after = [e for e in gateway_calls(await gw.sim_log(HUNG_MODEL)) if trip_s is not None and e["t_s"] > trip_s]
    return {
        "requests": len(calls),
        "statuses": statuses(calls),
        "run_s": d.s7_run_s,
        "warmup_requests": trip.requests,
        "breaker_opened": trip.opened,
        "failures_before_open": trip.failures_used,
        "max_upstream_in_flight_after_trip": (
            None if trip_s is None else max_in_flight(after, trip_s, min(now_s, trip_s + d.s7_run_s))
        ),
        "upstream_calls_after_trip": len(after),
        "upstream_call_starts_after_trip_s": []
        if trip_s is None
        else [round(float(e["t_s"]) - trip_s, 2) for e in after][:20],
    }


SCENARIOS = {
    "S1": Scenario(
        "heal_share",
        lambda d: (
            f"""\
  heal:
    offers: [{{provider: sim-a, model: "heal-a~down{d.s1_down_s}s"}}, {{provider: sim-b, model: heal-b}}]"""
        ),
        s1_heal_share,
    ),
    "S2": Scenario(
        "random_errors",
        lambda d: (
            """\
  rnd10: {offers: [{provider: sim-a, model: "rnd10~fail10"}]}
  rnd50: {offers: [{provider: sim-a, model: "rnd50~fail50"}]}"""
        ),
        s2_random_errors,
    ),
    "S3": Scenario(
        "down_then_heal",
        lambda d: (
            f"""\
  dh:
    order: priority
    offers: [{{provider: sim-a, model: "dh-p~down{d.s3_down_s}s"}}, {{provider: sim-b, model: dh-s}}]"""
        ),
        s3_down_then_heal,
    ),
    "S4": Scenario(
        "retry_after_3600",
        lambda d: (
            """\
  ra:
    order: priority
    offers: [{provider: sim-a, model: "ra-a~429ra3600"}, {provider: sim-b, model: ra-b}]"""
        ),
        s4_retry_after_3600,
    ),
    "S5": Scenario(
        "tenant_key",
        lambda d: (
            """\
  tk: {offers: [{provider: sim-a, model: tk-a}]}"""
        ),
        s5_tenant_key,
    ),
    "S6": Scenario(
        "recovery_herd",
        lambda d: (
            f"""\
  herd: {{offers: [{{provider: sim-a, model: "{HERD_MODEL}"}}]}}"""
        ),
        s6_recovery_herd,
    ),
    "S7": Scenario(
        "hung_probe",
        lambda d: (
            f"""\
  hung: {{offers: [{{provider: sim-a, model: "{HUNG_MODEL}"}}]}}"""
        ),
        s7_hung_probe,
        breaker=lambda d: {"cooldown_s": 2 if d.s7_run_s < 60 else 5},
    ),
}
