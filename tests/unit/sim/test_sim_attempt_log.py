"""Unit tests for the attempt log, scenario cursors and OpenAI wire helpers."""

from __future__ import annotations

import hashlib
import json

import pytest

from turnout_sim import openai_wire as wire
from turnout_sim.attempt_log import (
    AttemptLog,
    End,
    ScenarioCursors,
    auth_fingerprint,
)
from turnout_sim.scenarios import parse_scenario


def test_fingerprint_is_sha256_prefix_and_never_the_key() -> None:
    value = "Bearer sk-secret"
    assert auth_fingerprint(value) == hashlib.sha256(value.encode()).hexdigest()[:8]
    assert auth_fingerprint(None) is None


def test_log_records_in_order_filters_and_clears() -> None:
    log = AttemptLog()
    a = log.record(t_s=1.0, model="a", stream=False, authorization="Bearer k", request_id="r1")
    log.record(t_s=2.0, model="b", stream=True, authorization=None, request_id=None)
    a.status, a.step = 200, "200"
    assert [e.seq for e in log.entries()] == [1, 2]
    assert [e.to_json() for e in log.entries("a")] == [
        {
            "seq": 1,
            "t_s": 1.0,
            "model": "a",
            "step": "200",
            "status": 200,
            "stream": False,
            "auth_fingerprint": auth_fingerprint("Bearer k"),
            "request_id": "r1",
            "ended_s": None,
            "end": None,
        }
    ]
    assert "Bearer k" not in json.dumps([e.to_json() for e in log.entries()])
    log.clear()
    assert log.entries() == []
    assert log.record(t_s=3.0, model="a", stream=False, authorization=None, request_id=None).seq == 1


def test_attempt_finish_records_first_end_only() -> None:
    log = AttemptLog()
    a = log.record(t_s=1.0, model="a", stream=True, authorization=None, request_id=None)
    assert a.finish(End.CLIENT_GONE, 2.5) is True
    assert a.finish(End.COMPLETE, 3.0) is False  # the first end sticks
    assert (a.to_json()["ended_s"], a.to_json()["end"]) == (2.5, "client_gone")
    assert json.loads(json.dumps(a.to_json()))["end"] == "client_gone"
    assert {e.value for e in End} == {"complete", "client_gone", "fault"}


def test_cursors_advance_repeat_last_and_track_elapsed() -> None:
    cursors = ScenarioCursors()
    steps = parse_scenario("503,429,200")
    key = ("t~503,429,200", None)
    got = [cursors.advance(key, steps, now_s=100.0 + i) for i in range(5)]
    assert [s.token for s, _ in got] == ["503", "429", "200", "200", "200"]
    assert [elapsed for _, elapsed in got] == [0.0, 1.0, 2.0, 3.0, 4.0]
    # another key (same model, header given) has its own cursor
    assert cursors.advance((key[0], "503,429,200"), steps, 200.0)[0].token == "503"
    cursors.clear()
    assert cursors.advance(key, steps, 300.0) == (steps[0], 0.0)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ([], "could not parse the JSON"),
        ({"messages": []}, "must provide a model"),
        ({"model": "m"}, "Missing required parameter: 'messages'"),
        (
            {"model": "m", "messages": [], "max_tokens": 0},
            "integer below minimum value",
        ),
        ({"model": "m", "messages": [], "max_tokens": "5"}, "expected an integer"),
    ],
    ids=[
        "not-object",
        "no-model",
        "no-messages",
        "zero-max-tokens",
        "string-max-tokens",
    ],
)
def test_parse_request_rejects(body: object, fragment: str) -> None:
    with pytest.raises(wire.RequestError) as info:
        wire.parse_request(body)
    assert fragment in info.value.body["error"]["message"]
    assert set(info.value.body["error"]) == {"message", "type", "param", "code"}


def test_parse_request_defaults_and_caps() -> None:
    req = wire.parse_request({"model": "m", "messages": [{"role": "user", "content": "a b c"}]})
    assert (
        req.stream,
        req.include_usage,
        req.completion_tokens,
        req.prompt_tokens,
    ) == (False, False, 12, 3)
    big = wire.parse_request({"model": "m", "messages": [], "max_tokens": 100_000, "stream": True})
    assert big.completion_tokens == wire.MAX_TOKENS_CAP and big.stream
    newer = wire.parse_request({"model": "m", "messages": [], "max_completion_tokens": 3, "max_tokens": 9})
    assert newer.completion_tokens == 3


def test_tokens_join_to_answer_text() -> None:
    assert "".join(wire.tokens(3)) == "tok0 tok1 tok2"
    assert wire.tokens(0) == []
