"""`fail<P>`, `cap<N>` and revoked keys: parsing, the pure decisions, and both wires over HTTP."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator

import httpx
import pytest

from turnout_sim.app import seed_from_env, start_in_background
from turnout_sim.attempt_log import ScenarioCursors
from turnout_sim.clock import ManualClock
from turnout_sim.credentials import REVOKED_PREFIX
from turnout_sim.faults import Verdict, admit, fail_roll, fails
from turnout_sim.scenarios import Step, StepKind, parse_scenario, parse_step

OPENAI = {"Authorization": "Bearer k"}
ANTHROPIC = {"x-api-key": "sk-ant-k", "anthropic-version": "2023-06-01"}
USER = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        ("fail0", {"kind": StepKind.FAIL, "percent": 0}),
        ("fail10", {"kind": StepKind.FAIL, "percent": 10}),
        ("FAIL100", {"kind": StepKind.FAIL, "percent": 100}),
        ("fail50i20+5ms", {"kind": StepKind.FAIL, "percent": 50, "interval_ms": 20, "latency_ms": 5}),
        ("cap1", {"kind": StepKind.CAP, "capacity_per_s": 1}),
        ("cap50", {"kind": StepKind.CAP, "capacity_per_s": 50}),
        ("cap100000i3", {"kind": StepKind.CAP, "capacity_per_s": 100_000, "interval_ms": 3}),
    ],
)
def test_fail_and_cap_parse(text: str, fields: dict[str, object]) -> None:
    assert parse_step(text) == Step(token=text, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("fail101", "percent must be between 0 and 100, got 101"),
        ("cap0", "capacity_per_s must be between 1 and 100000, got 0"),
        ("cap100001", "capacity_per_s must be between 1 and 100000, got 100001"),
        ("fail", "unknown step"),
        ("cap", "unknown step"),
        ("fail-5", "not of the form"),
        ("cap5s", "unknown step"),
    ],
)
def test_fail_and_cap_bounds_are_refused(text: str, fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_scenario(f"503,{text}")
    assert "step 2" in str(info.value) and fragment in str(info.value)


KEY = ("f~fail10", None)


def test_fail_roll_is_a_pure_function_of_seed_key_and_ordinal() -> None:
    rolls = [fail_roll(7, KEY, k) for k in range(1000)]
    assert rolls == [fail_roll(7, KEY, k) for k in range(1000)]
    assert all(0.0 <= r < 100.0 for r in rolls)
    assert rolls != [fail_roll(8, KEY, k) for k in range(1000)]  # another seed
    assert rolls != [fail_roll(7, ("f~fail10", "fail10"), k) for k in range(1000)]  # another key
    assert fail_roll(0, ("m", None), 0) != fail_roll(0, ("m", "None"), 0)  # header None is not "None"


@pytest.mark.parametrize("percent", [0, 1, 10, 50, 90, 100])
def test_fail_share_over_ten_thousand_rolls_is_close_to_percent(percent: int) -> None:
    n = 10_000
    failed = sum(fails(percent, 0, KEY, k) for k in range(n))
    assert abs(failed / n * 100 - percent) < 1.5  # 1.5 points ≈ 5 standard deviations at p = 0.5
    if percent in (0, 100):
        assert failed == n * percent // 100


def test_admit_counts_only_admitted_requests_in_a_sliding_second() -> None:
    window: deque[float] = deque()
    arrivals = [0.0, 0.25, 0.5, 0.75, 1.0, 1.125, 1.25, 1.375, 2.0]  # exact in binary
    got = [admit(window, t, capacity=2) for t in arrivals]
    # 0.0 and 0.25 fill the window; 0.5 and 0.75 are refused and not counted; at 1.0 the
    # 0.0 admission has left (window (0.0, 1.0]); at 1.25 the 0.25 one has left.
    assert got == [True, True, False, False, True, False, True, False, True]
    assert list(window) == [1.25, 2.0]


def test_admit_under_steady_overload_serves_exactly_capacity_per_second() -> None:
    window: deque[float] = deque()
    served = [t / 100 for t in range(1000) if admit(window, t / 100, capacity=5)]  # 100 req/s for 10 s
    assert len(served) == 50
    assert all(sum(1 for s in served if start <= s < start + 1) == 5 for start in range(10))


def test_cursor_turns_carry_ordinal_and_verdict() -> None:
    cursors = ScenarioCursors()
    steps = parse_scenario("down2s,cap1")
    key = ("t~down2s,cap1", None)
    turns = [cursors.turn(key, steps, t, seed=0) for t in (10.0, 10.5, 12.0, 12.5, 13.1)]
    assert [t.ordinal for t in turns] == [0, 1, 2, 3, 4]
    assert [t.step.token for t in turns] == ["down2s", "cap1", "cap1", "cap1", "cap1"]
    assert [t.verdict for t in turns] == [
        Verdict.UNAVAILABLE,
        Verdict.SERVE,
        Verdict.SERVE,
        Verdict.OVERLOADED,
        Verdict.SERVE,
    ]
    fail_steps = parse_scenario("fail30")
    fail_key = ("r~fail30", None)
    verdicts = [cursors.turn(fail_key, fail_steps, 1.0, seed=3).verdict for _ in range(50)]
    assert verdicts == [Verdict.UNAVAILABLE if fails(30, 3, fail_key, k) else Verdict.SERVE for k in range(50)]


def test_seed_from_env() -> None:
    assert seed_from_env({}) == 0
    assert seed_from_env({"TURNOUT_SIM_SEED": " 42 "}) == 42
    with pytest.raises(ValueError, match="TURNOUT_SIM_SEED must be an integer"):
        seed_from_env({"TURNOUT_SIM_SEED": "x"})


@pytest.fixture
async def seeded() -> AsyncIterator[tuple[str, str]]:
    """Two simulators with seed 11 and one with seed 12 (base URLs)."""
    started = [await start_in_background("127.0.0.1", 0, seed=s) for s in (11, 11, 12)]
    try:
        yield tuple(url for _, url in started)  # type: ignore[misc]
    finally:
        for runner, _ in started:
            await runner.cleanup()


async def _statuses(url: str, model: str, n: int) -> list[int]:
    async with httpx.AsyncClient(base_url=url, headers=OPENAI, timeout=5) as c:
        return [
            (await c.post("/v1/chat/completions", json={"model": model, "messages": USER})).status_code
            for _ in range(n)
        ]


async def test_fail_over_http_follows_the_seeded_rolls(seeded: tuple[str, str, str]) -> None:
    model = "f~fail40"
    first, again, other = [await _statuses(url, model, 40) for url in seeded]
    expected = [503 if fails(40, 11, (model, None), k) else 200 for k in range(40)]
    assert first == again == expected
    assert other != first and set(first) == {200, 503}


async def test_fail_answers_the_realistic_503_or_a_normal_stream(sim_url: str) -> None:
    async with httpx.AsyncClient(base_url=sim_url, headers=OPENAI, timeout=5) as c:
        down = await c.post("/v1/chat/completions", json={"model": "f~fail100", "messages": USER})
        assert down.status_code == 503
        assert down.json()["error"] == {
            "message": "The engine is currently overloaded, please try again later.",
            "type": "server_error",
            "param": None,
            "code": None,
        }
        body = {"model": "f~fail0i5", "messages": USER, "stream": True, "max_tokens": 3}
        async with c.stream("POST", "/v1/chat/completions", json=body) as resp:
            raw = (await resp.aread()).decode()
        assert resp.status_code == 200 and raw.endswith("data: [DONE]\n\n")
        assert raw.count('"content"') == 4  # role chunk + three words


async def test_cap_over_http_sheds_with_retry_after_and_recovers(fake_clock_url: str, clock: ManualClock) -> None:
    async with httpx.AsyncClient(base_url=fake_clock_url, headers=OPENAI, timeout=5) as c:

        async def post() -> httpx.Response:
            return await c.post("/v1/chat/completions", json={"model": "c~cap2", "messages": USER})

        first, second, third = await post(), await post(), await post()
        assert [r.status_code for r in (first, second, third)] == [200, 200, 503]
        assert third.headers["retry-after"] == "1"
        assert third.json()["error"]["type"] == "server_error"
        assert "overloaded" in third.json()["error"]["message"]
        clock.advance(0.99)
        assert (await post()).status_code == 503
        clock.advance(0.02)  # 1.01 s after the two admissions
        assert [(await post()).status_code for _ in range(3)] == [200, 200, 503]
        log = (await c.get("/sim/log", params={"model": "c~cap2"})).json()
        assert [e["status"] for e in log] == [200, 200, 503, 503, 200, 200, 503]
        assert [e["t_s"] for e in log] == sorted(e["t_s"] for e in log)  # arrival times, epoch seconds


async def test_anthropic_wire_fail_and_cap(fake_clock_url: str) -> None:
    async with httpx.AsyncClient(base_url=fake_clock_url, headers=ANTHROPIC, timeout=5) as c:

        async def post(model: str) -> httpx.Response:
            return await c.post("/v1/messages", json={"model": model, "max_tokens": 3, "messages": USER})

        failed = await post("a~fail100")
        assert failed.status_code == 503 and failed.json()["error"]["type"] == "api_error"
        assert (await post("a~fail0")).json()["type"] == "message"
        served, shed = await post("a~cap1"), await post("a~cap1")
        assert served.status_code == 200
        assert shed.status_code == 529
        assert shed.json()["error"] == {"type": "overloaded_error", "message": "Overloaded"}


async def test_revoked_key_is_refused_with_401_on_both_wires_and_logged(sim_url: str) -> None:
    revoked = f"{REVOKED_PREFIX}-tenant-0001"
    async with httpx.AsyncClient(base_url=sim_url, timeout=5) as c:
        chat = await c.post(
            "/v1/chat/completions",
            json={"model": "r~200", "messages": USER},
            headers={"Authorization": f"Bearer {revoked}"},
        )
        assert chat.status_code == 401 and chat.json()["error"]["code"] == "invalid_api_key"
        msg = await c.post(
            "/v1/messages",
            json={"model": "r~200", "max_tokens": 3, "messages": USER},
            headers={**ANTHROPIC, "x-api-key": revoked},
        )
        assert msg.status_code == 401 and msg.json()["error"]["type"] == "authentication_error"
        ok = await c.post("/v1/chat/completions", json={"model": "r~200", "messages": USER}, headers=OPENAI)
        assert ok.status_code == 200
        log = (await c.get("/sim/log", params={"model": "r~200"})).json()
        assert [(e["status"], e["step"]) for e in log] == [(401, None), (401, None), (200, "200")]
