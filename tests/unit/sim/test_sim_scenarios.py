"""Table tests for the pure scenario DSL parser (turnout_sim.scenarios)."""

from __future__ import annotations

import dataclasses

import pytest

from turnout_sim.scenarios import (
    DEFAULT_STEP,
    ERROR_STATUSES,
    Step,
    StepKind,
    parse_scenario,
    parse_step,
    scenario_for,
    split_model,
)

K = StepKind

# (text, expected kind, expected non-default fields)
VALID = [
    ("200", K.OK, {"status": 200}),
    ("200+300ms", K.OK, {"status": 200, "latency_ms": 300}),
    ("200i20", K.OK, {"status": 200, "interval_ms": 20}),
    ("200i20+5ms", K.OK, {"status": 200, "interval_ms": 20, "latency_ms": 5}),
    ("503+50ms", K.ERROR, {"status": 503, "latency_ms": 50}),
    ("529", K.ERROR, {"status": 529}),
    ("429ra3", K.RETRY_AFTER, {"status": 429, "seconds": 3}),
    ("429ra0", K.RETRY_AFTER, {"status": 429, "seconds": 0}),
    ("429rad5", K.RETRY_AFTER_DATE, {"status": 429, "seconds": 5}),
    ("429ram250", K.RETRY_AFTER_MS, {"status": 429, "delay_ms": 250}),
    ("429rr6m0s", K.RESET_REQUESTS, {"status": 429, "duration": "6m0s"}),
    ("429rr20ms", K.RESET_REQUESTS, {"status": 429, "duration": "20ms"}),
    ("429rr1.5s", K.RESET_REQUESTS, {"status": 429, "duration": "1.5s"}),
    ("403rl", K.RATE_LIMIT_403, {"status": 403}),
    ("quota", K.QUOTA, {"status": 429}),
    ("ctx", K.CONTEXT, {"status": 400}),
    ("policy", K.POLICY, {"status": 400}),
    ("cf400", K.PROMPT_FILTER, {"status": 400}),
    ("CF400+5ms", K.PROMPT_FILTER, {"status": 400, "latency_ms": 5}),
    ("cf200", K.FILTERED, {"status": 200}),
    ("cf200i10", K.FILTERED, {"status": 200, "interval_ms": 10}),
    ("bodyerr", K.BODY_ERROR, {"status": 200}),
    ("bodyerr429", K.BODY_ERROR_429, {"status": 200}),
    ("reset", K.RESET, {}),
    ("hang", K.HANG, {}),
    ("close+10ms", K.CLOSE, {"latency_ms": 10}),
    ("slow300", K.SLOW, {"status": 200, "delay_ms": 300}),
    ("cut0", K.CUT, {"status": 200, "count": 0}),
    ("cut3i10", K.CUT, {"status": 200, "count": 3, "interval_ms": 10}),
    ("stall2", K.STALL, {"status": 200, "count": 2}),
    ("badchunk1", K.BAD_CHUNK, {"status": 200, "count": 1}),
    ("nodone", K.NO_DONE, {"status": 200}),
    ("down2s", K.DOWN, {"seconds": 2}),
    ("noprefill", K.NO_PREFILL, {}),  # status depends on the request
    ("NoPrefill", K.NO_PREFILL, {}),
    ("noprefilli20", K.NO_PREFILL, {"interval_ms": 20}),
    ("noprefill+30ms", K.NO_PREFILL, {"latency_ms": 30}),
    ("noprefilli5+30ms", K.NO_PREFILL, {"interval_ms": 5, "latency_ms": 30}),
    ("  Reset ", K.RESET, {}),  # whitespace and case are tolerated
]


@pytest.mark.parametrize(("text", "kind", "fields"), VALID, ids=[v[0].strip() for v in VALID])
def test_parse_step_valid(text: str, kind: StepKind, fields: dict[str, object]) -> None:
    step = parse_step(text)
    expected = Step(kind=kind, token=text.strip(), **fields)  # type: ignore[arg-type]
    assert step == expected


@pytest.mark.parametrize("status", sorted(ERROR_STATUSES))
def test_every_bare_error_status_parses(status: int) -> None:
    assert parse_step(str(status)) == Step(kind=K.ERROR, token=str(status), status=status)


# (text, fragment the error message must contain)
JUNK = [
    ("", "empty scenario"),
    ("   ", "empty scenario"),
    ("200,,503", "step 2: empty step"),
    ("200,", "step 2: empty step"),
    ("418", "unsupported status 418"),
    ("201", "unsupported status 201"),
    ("abc", "unknown step"),
    ("cut", "unknown step"),
    ("slow", "unknown step"),
    ("down5", "unknown step"),
    ("down0s", "between 1 and 86400"),
    ("badchunk0", "between 1 and 4096"),
    ("cut5000", "between 0 and 4096"),
    ("slow700000", "between 0 and 600000"),
    ("200+5", "not of the form"),
    ("200+5s", "not of the form"),
    ("200+-5ms", "not of the form"),
    ("503i10", "chunk interval"),
    ("429ra5i10", "chunk interval"),
    ("cf400i10", "chunk interval"),
    ("429rrsoon", "429rr needs an OpenAI duration"),
    ("429rr", "429rr needs an OpenAI duration"),
    ("200;503", "not of the form"),
    ("200~503", "not of the form"),
    ("200 503", "not of the form"),
    ("5xx", "unknown step"),
    ("noprefill1", "unknown step"),
    ("prefill", "unknown step"),
    ("noprefill+5", "not of the form"),
]


@pytest.mark.parametrize(("text", "fragment"), JUNK, ids=[j[0] or "<empty>" for j in JUNK])
def test_parse_scenario_rejects_junk(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=None) as info:
        parse_scenario(text)
    assert fragment in str(info.value)


def test_scenario_keeps_order_and_tokens() -> None:
    steps = parse_scenario("503, 429ra1 ,200+10ms")
    assert [s.token for s in steps] == ["503", "429ra1", "200+10ms"]
    assert [s.kind for s in steps] == [K.ERROR, K.RETRY_AFTER, K.OK]


def test_error_names_the_position() -> None:
    with pytest.raises(ValueError, match=r"step 3: step 'bogus'"):
        parse_scenario("200,503,bogus")


def test_step_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        parse_step("200").status = 500  # type: ignore[misc]


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o", ("gpt-4o", None)),
        ("t1~200,503", ("t1", "200,503")),
        ("t1~", ("t1", "")),
        ("a~b~c", ("a", "b~c")),
    ],
    ids=["plain", "steps", "empty-steps", "two-tildes"],
)
def test_split_model(model: str, expected: tuple[str, str | None]) -> None:
    assert split_model(model) == expected


def test_scenario_for_plain_model_is_always_200() -> None:
    assert scenario_for("gpt-4o", None) == (DEFAULT_STEP,)


def test_scenario_for_header_overrides_model_steps() -> None:
    assert [s.token for s in scenario_for("t~503", "429,200")] == ["429", "200"]
    assert [s.token for s in scenario_for("plain", "reset")] == ["reset"]


@pytest.mark.parametrize("model", ["t~", "a~b~c", "t~200,nope"], ids=["empty", "tilde-in-steps", "bad-step"])
def test_scenario_for_bad_model_raises(model: str) -> None:
    with pytest.raises(ValueError):
        scenario_for(model, None)


def test_unknown_step_message_lists_noprefill() -> None:
    with pytest.raises(ValueError, match="noprefill"):
        parse_step("wat")


def test_noprefill_scenario_sequence() -> None:
    steps = parse_scenario("noprefill,200")
    assert [(s.kind, s.status) for s in steps] == [(K.NO_PREFILL, None), (K.OK, 200)]
