"""The start-up AOF check: the decision (pure), reading `CONFIG GET appendonly` (stubbed),
and the whole check against the session's real redis-server, which runs without AOF."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoPermissionError, ResponseError

from turnout.state.persistence import (
    ALLOW_ENV,
    Decision,
    Persistence,
    PersistenceRefused,
    allowed_by,
    decide,
    read_persistence,
    require_persistence,
    require_persistence_when_reachable,
)


class _Stub:
    """A client whose `config_get` answers `answer`, or raises it."""

    def __init__(self, answer: Any) -> None:
        self._answer = answer

    def config_get(self, pattern: str) -> Any:
        assert pattern == "appendonly"
        if isinstance(self._answer, Exception):
            raise self._answer
        return self._answer


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"appendonly": "yes"}, Persistence.AOF),
        ({b"appendonly": b"yes"}, Persistence.AOF),
        ({"appendonly": "no"}, Persistence.OFF),
        ({}, Persistence.UNKNOWN),
        (ResponseError("unknown command 'CONFIG'"), Persistence.UNKNOWN),
        (NoPermissionError("this user has no permissions to run the 'config|get' command"), Persistence.UNKNOWN),
        (RedisConnectionError("Connection refused"), Persistence.UNREACHABLE),
    ],
)
def test_read_persistence(answer: Any, expected: Persistence) -> None:
    assert read_persistence(_Stub(answer)) is expected  # type: ignore[arg-type]


def test_aof_on_starts_silently() -> None:
    assert decide(Persistence.AOF, allowed=False, service="turnout worker").level is None


def test_aof_off_refuses_unless_allowed_and_names_the_consequence_and_the_way_out() -> None:
    refused = decide(Persistence.OFF, allowed=False, service="turnout worker")
    assert not refused.start and refused.level == logging.ERROR
    assert "queued jobs" in refused.message and "circuit-breaker state" in refused.message
    assert (
        ALLOW_ENV in refused.message and "--allow-no-aof" in refused.message and "--appendonly yes" in refused.message
    )
    allowed = decide(Persistence.OFF, allowed=True, service="turnout worker")
    assert allowed.start and allowed.level == logging.WARNING and "queued jobs" in allowed.message


@pytest.mark.parametrize("persistence", [Persistence.UNKNOWN, Persistence.UNREACHABLE])
def test_what_cannot_be_checked_warns_and_starts(persistence: Persistence) -> None:
    decision = decide(persistence, allowed=False, service="turnout ingress")
    assert decision.start and decision.level == logging.WARNING
    if persistence is Persistence.UNREACHABLE:
        assert not decision.checked and "will be checked once it answers" in decision.message
    else:
        assert decision.checked and "could not be checked" in decision.message, "CONFIG refused: never seen"


def test_only_an_unreachable_redis_leaves_the_check_to_do() -> None:
    for persistence in Persistence:
        for allowed in (False, True):
            checked = decide(persistence, allowed=allowed, service="s").checked
            assert checked is (persistence is not Persistence.UNREACHABLE), (persistence, allowed)


def test_the_later_check_repeats_quietly_until_redis_answers_then_decides() -> None:
    unreachable = decide(Persistence.UNREACHABLE, allowed=False, service="s")
    aof = decide(Persistence.AOF, allowed=False, service="s")
    answers = [unreachable, unreachable, unreachable, aof]
    slept: list[float] = []

    def check() -> Decision:
        return answers.pop(0)

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    assert asyncio.run(require_persistence_when_reachable(check, sleep=sleep, interval_s=1.0)) == aof
    assert slept == [1.0, 1.0, 1.0] and answers == []


def test_the_later_check_raises_the_refusal_of_a_redis_without_aof() -> None:
    def check() -> Decision:
        raise PersistenceRefused("refusing to start: Redis runs without AOF persistence")

    async def sleep(seconds: float) -> None:
        raise AssertionError("no wait once Redis answered")

    with pytest.raises(PersistenceRefused):
        asyncio.run(require_persistence_when_reachable(check, sleep=sleep))


def test_a_repeated_check_of_an_unreachable_redis_logs_nothing(caplog: Any) -> None:
    with caplog.at_level(logging.INFO, logger="turnout.persistence"):
        quiet = require_persistence("redis://127.0.0.1:1/0", service="turnout worker", env={}, quiet_unreachable=True)
        loud = require_persistence("redis://127.0.0.1:1/0", service="turnout worker", env={})
    assert not quiet.checked and not loud.checked
    assert [r.getMessage() for r in caplog.records] == [loud.message], "only the first check speaks"


@pytest.mark.parametrize(
    ("value", "expected"), [("1", True), ("true", True), ("YES", True), ("0", False), ("", False), ("no", False)]
)
def test_allowed_by_the_environment(value: str, expected: bool) -> None:
    assert allowed_by({ALLOW_ENV: value}) is expected
    assert allowed_by({}) is False


def test_a_redis_without_aof_refuses_with_one_structured_error(redis_url: str, caplog: Any) -> None:
    with caplog.at_level(logging.INFO, logger="turnout.persistence"), pytest.raises(PersistenceRefused) as refused:
        require_persistence(redis_url, service="turnout worker", env={})
    assert "refusing to start" in str(refused.value)
    [line] = caplog.records
    assert line.levelno == logging.ERROR and line.persistence == "off" and line.refused is True


def test_allowed_by_flag_or_environment_it_starts_with_a_warning(redis_url: str, caplog: Any) -> None:
    with caplog.at_level(logging.INFO, logger="turnout.persistence"):
        assert require_persistence(redis_url, service="turnout worker", allow=True, env={}).start
        assert require_persistence(redis_url, service="turnout worker", env={ALLOW_ENV: "1"}).start
    assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.WARNING]


def test_an_unreachable_redis_is_not_refused() -> None:
    decision = require_persistence("redis://127.0.0.1:1/0", service="turnout ingress", env={})
    assert decision.start and "unreachable" in decision.message


def test_turnout_dev_on_a_redis_without_aof_warns_and_lets_its_processes_start(redis_url: str, capsys: Any) -> None:
    from turnout_cli.dev import _persistence_args

    assert _persistence_args(redis_url) == ["--allow-no-aof"]
    assert "AOF persistence is off" in capsys.readouterr().err
    assert _persistence_args("redis://127.0.0.1:1/0") == []  # unreachable: the processes judge for themselves
