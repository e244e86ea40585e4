"""`listen_forever`: reconnects, jittered backoff bounds, stop; and the one error mapping of the stores.

No real Redis and no real time: the pub/sub is a scripted fake, the sleep
records the delays asked for, the RNG draws what the test says.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.exceptions import ConnectionError as RedisConnectionError

from turnout.state.errors import StateUnavailable, maps_state_errors, outage_kind, state_errors
from turnout.state.listen import Backoff, Message, listen_forever

LOST = object()
"""In a session script: the connection drops here."""


class FixedDraw(random.Random):
    """An RNG whose `random()` returns the given draws in turn (then the last one)."""

    def __init__(self, *draws: float) -> None:
        super().__init__(0)
        self._draws = list(draws)

    def random(self) -> float:
        return self._draws.pop(0) if len(self._draws) > 1 else self._draws[0]


class FakePubSub:
    def __init__(self, redis: FakeRedis) -> None:
        self._redis = redis
        self.closed = False

    async def subscribe(self, *channels: str) -> None:
        self._redis.subscribed.append(channels)
        if self._redis.refuse:
            self._redis.refuse -= 1
            raise RedisConnectionError("Connection refused")
        self._script = self._redis.sessions.pop(0) if self._redis.sessions else []

    async def get_message(self, ignore_subscribe_messages: bool, timeout: float | None) -> Message | None:
        self._redis.timeouts.append(timeout)
        if not self._script:
            await asyncio.Event().wait()  # nothing more: blocks until the test cancels
        item = self._script.pop(0)
        if item is LOST:
            raise RedisConnectionError("Connection reset by peer")
        assert item is None or isinstance(item, dict)
        return item

    async def aclose(self) -> None:
        self.closed = True
        self._redis.closed += 1


class FakeRedis:
    """`refuse`: subscriptions refused first; `sessions`: per accepted subscription, what
    `get_message` returns in turn (a message, None, or `LOST`)."""

    def __init__(self, refuse: int = 0, sessions: list[list[Any]] | None = None) -> None:
        self.refuse = refuse
        self.sessions = sessions or []
        self.subscribed: list[tuple[str, ...]] = []
        self.timeouts: list[float | None] = []
        self.closed = 0

    def pubsub(self, ignore_subscribe_messages: bool = False) -> FakePubSub:
        return FakePubSub(self)


def msg(data: bytes) -> Message:
    return {"type": "message", "channel": b"c", "data": data}


class Recorder:
    def __init__(self, stop_after: int | None = None, stop: asyncio.Event | None = None) -> None:
        self.got: list[Message | None] = []
        self.delays: list[float] = []
        self.subscribed: list[bool] = []
        self._stop_after = stop_after
        self.stop = stop or asyncio.Event()

    async def on_message(self, message: Message | None) -> None:
        self.got.append(message)
        if self._stop_after is not None and len(self.got) >= self._stop_after:
            self.stop.set()

    async def sleep(self, delay_s: float) -> None:
        self.delays.append(delay_s)

    async def on_subscribed(self, reconnected: bool) -> None:
        self.subscribed.append(reconnected)


def as_redis(fake: FakeRedis) -> Any:
    """The fake where a redis-py client is expected (it has the pub/sub surface the loop uses)."""
    return fake


async def run(redis: FakeRedis, rec: Recorder, rng: random.Random, **kwargs: Any) -> None:
    await asyncio.wait_for(
        listen_forever(
            as_redis(redis),
            ["c"],
            rec.on_message,
            name="test listener",
            rng=rng,
            sleep=rec.sleep,
            on_subscribed=rec.on_subscribed,
            stop=rec.stop,
            **kwargs,
        ),
        5,
    )


async def test_listen_reconnects_after_refusals_and_delivers_messages() -> None:
    redis = FakeRedis(refuse=3, sessions=[[msg(b"a"), msg(b"b")]])
    rec = Recorder(stop_after=2)
    await run(redis, rec, FixedDraw(1.0))
    assert [m["data"] for m in rec.got if m] == [b"a", b"b"]
    assert rec.delays == [0.05, 0.1, 0.2], "one backoff per refusal, doubling"
    assert rec.subscribed == [True], "a subscription after failures catches up"
    assert len(redis.subscribed) == 4 and redis.closed == 4, "every subscription is closed"


async def test_listen_first_subscription_is_not_a_reconnect_and_a_lost_one_is() -> None:
    redis = FakeRedis(sessions=[[msg(b"a"), LOST], [msg(b"b")]])
    rec = Recorder(stop_after=2)
    await run(redis, rec, FixedDraw(0.0))
    assert rec.subscribed == [False, True]
    assert rec.delays == [0.025], "the lowest delay of the first failure: half its ceiling"


async def test_listen_backoff_resets_after_a_successful_subscription() -> None:
    redis = FakeRedis(refuse=2, sessions=[[LOST], [msg(b"x")]])
    rec = Recorder(stop_after=1)
    await run(redis, rec, FixedDraw(1.0))
    assert rec.delays == [0.05, 0.1, 0.05]


async def test_listen_backoff_is_capped_and_jittered_by_the_rng() -> None:
    redis = FakeRedis(refuse=8, sessions=[[msg(b"x")]])
    rec = Recorder(stop_after=1)
    await run(redis, rec, FixedDraw(1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0), backoff=Backoff(base_s=0.1, cap_s=0.5))
    assert rec.delays == pytest.approx([0.1, 0.1, 0.4, 0.25, 0.5, 0.25, 0.5, 0.25])


async def test_listen_two_listeners_with_different_rngs_do_not_come_back_in_step() -> None:
    delays = []
    for seed in (1, 2):
        rec = Recorder(stop_after=1)
        await run(FakeRedis(refuse=4, sessions=[[msg(b"x")]]), rec, random.Random(seed))
        delays.append(rec.delays)
    assert delays[0] != delays[1]


async def test_listen_skips_non_messages_and_wakes_on_idle() -> None:
    sub = {"type": "subscribe", "channel": b"c", "data": 1}
    redis = FakeRedis(sessions=[[sub, None, msg(b"a")]])
    rec = Recorder(stop_after=2)
    await run(redis, rec, FixedDraw(0.5), idle_s=0.25)
    assert rec.got == [None, msg(b"a")], "the idle wake is handed over as None, a confirmation is not"
    assert redis.timeouts[0] == 0.25


async def test_listen_without_idle_waits_for_messages_only() -> None:
    redis = FakeRedis(sessions=[[None, msg(b"a")]])
    rec = Recorder(stop_after=1)
    await run(redis, rec, FixedDraw(0.5))
    assert rec.got == [msg(b"a")]
    assert redis.timeouts[0] is None


async def test_listen_returns_at_once_when_stopped_before_it_starts() -> None:
    redis = FakeRedis()
    rec = Recorder()
    rec.stop.set()
    await run(redis, rec, FixedDraw(0.5))
    assert redis.subscribed == [] and rec.got == []


async def test_listen_stops_when_the_store_error_comes_from_the_caller_hooks_too() -> None:
    redis = FakeRedis(sessions=[[], [msg(b"a")]])
    rec = Recorder(stop_after=1)
    calls = 0

    async def catch_up(reconnected: bool) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            with state_errors():
                raise OSError("store read failed")

    await asyncio.wait_for(
        listen_forever(
            as_redis(redis),
            ["c"],
            rec.on_message,
            name="t",
            rng=FixedDraw(1.0),
            sleep=rec.sleep,
            on_subscribed=catch_up,
            stop=rec.stop,
        ),
        5,
    )
    assert rec.delays == [0.05] and rec.got == [msg(b"a")]


async def test_listen_other_errors_end_the_loop() -> None:
    redis = FakeRedis(sessions=[[msg(b"a")]])

    async def broken(message: Message | None) -> None:
        raise ValueError("a bug, not an outage")

    with pytest.raises(ValueError):
        await asyncio.wait_for(listen_forever(as_redis(redis), ["c"], broken, name="t", rng=FixedDraw(0.5)), 5)
    assert redis.closed == 1


async def test_listen_cancel_closes_the_subscription() -> None:
    redis = FakeRedis(sessions=[[]])
    rec = Recorder()
    task = asyncio.create_task(listen_forever(as_redis(redis), ["c"], rec.on_message, name="t", rng=FixedDraw(0.5)))
    while not redis.timeouts:
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert redis.closed == 1


@given(
    failures=st.integers(min_value=1, max_value=10_000),
    draw=st.floats(min_value=0.0, max_value=1.0),
    base_s=st.floats(min_value=0.001, max_value=5.0),
    cap_s=st.floats(min_value=0.001, max_value=60.0),
)
def test_backoff_delay_stays_within_half_ceiling_and_ceiling(
    failures: int, draw: float, base_s: float, cap_s: float
) -> None:
    backoff = Backoff(base_s=base_s, cap_s=cap_s)
    ceiling = min(cap_s, base_s * 2.0 ** min(failures - 1, 60))
    delay = backoff.delay_s(failures, draw)
    assert ceiling / 2 <= delay <= ceiling <= cap_s
    assert backoff.delay_s(failures + 1, draw) >= delay, "never shorter after another failure"


# -- the error mapping of the stores ------------------------------------------------------------


@maps_state_errors
class Store:
    def __init__(self, error: BaseException | None) -> None:
        self._error = error

    async def read(self) -> int:
        if self._error is not None:
            raise self._error
        return 1

    async def rows(self) -> AsyncIterator[int]:
        yield 1
        if self._error is not None:
            raise self._error

    def name(self) -> str:
        return "plain methods are left alone"


@pytest.mark.parametrize("error", [RedisConnectionError("down"), ConnectionResetError("reset"), TimeoutError()])
async def test_store_errors_become_state_unavailable_with_the_cause_chained(error: BaseException) -> None:
    with pytest.raises(StateUnavailable) as info:
        await Store(error).read()
    assert info.value.__cause__ is error
    assert outage_kind(info.value) == type(error).__name__
    rows = Store(error).rows()
    assert await anext(rows) == 1
    with pytest.raises(StateUnavailable):
        await anext(rows)


async def test_store_other_errors_pass_through_unchanged() -> None:
    with pytest.raises(KeyError):
        await Store(KeyError("a caller's own error")).read()
    assert await Store(None).read() == 1
    assert Store(None).name() == "plain methods are left alone"


async def test_listen_also_lost_errors_are_retried_like_a_lost_redis() -> None:
    redis = FakeRedis(sessions=[[msg(b"a")], [msg(b"b")]])
    rec = Recorder(stop_after=1)
    raised = 0

    async def racy(message: Message | None) -> None:
        nonlocal raised
        if raised == 0:
            raised += 1
            raise KeyError("a write race the next read resolves")
        await rec.on_message(message)

    await asyncio.wait_for(
        listen_forever(
            as_redis(redis),
            ["c"],
            racy,
            name="t",
            rng=FixedDraw(1.0),
            sleep=rec.sleep,
            stop=rec.stop,
            also_lost=(KeyError,),
        ),
        5,
    )
    assert rec.delays == [0.05] and rec.got == [msg(b"b")]
