"""The enqueue's optional `WAIT` for a replica (real `redis-server`, no replica attached): off by
default, the job accepted when the wait times out (one warning per interval), the script
run on a primary that never loaded it, and the settings that turn it on named when malformed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import pytest
from redis.asyncio import Redis

from support.jobs import job_payload
from turnout.settings import Settings, SettingsError
from turnout.state import keys
from turnout.state.jobs import JobQueue, ReplicaWait
from turnout.state.jobs import door as door_module
from turnout.state.jobs import replicated as replicated_module


def _queue(redis: Redis, wait: ReplicaWait | None) -> JobQueue:
    return JobQueue(redis, listen_redis=redis, ingress_id="t", max_depth=10_000, replica_wait=wait)


def test_the_wait_is_off_unless_replicas_are_asked_for() -> None:
    assert ReplicaWait.of(0, 250) is None
    assert ReplicaWait.of(1, 250) == ReplicaWait(replicas=1, timeout_ms=250)
    settings = Settings.from_env({})
    assert (settings.enqueue_wait_replicas, settings.enqueue_wait_ms) == (0, 250)
    on = Settings.from_env({"TURNOUT_ENQUEUE_WAIT_REPLICAS": "1", "TURNOUT_ENQUEUE_WAIT_MS": "100"})
    assert ReplicaWait.of(on.enqueue_wait_replicas, on.enqueue_wait_ms) == ReplicaWait(1, 100)


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("TURNOUT_ENQUEUE_WAIT_REPLICAS", "-1", "a whole number from 0 to 16"),
        ("TURNOUT_ENQUEUE_WAIT_REPLICAS", "one", "a whole number from 0 to 16"),
        ("TURNOUT_ENQUEUE_WAIT_MS", "0", "a whole number of ms from 1 to 60000"),
        ("TURNOUT_ENQUEUE_WAIT_MS", "1.5", "a whole number of ms from 1 to 60000"),
    ],
)
def test_malformed_wait_settings_are_named(name: str, value: str, expected: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({name: value})
    assert f"{name} must be {expected}, got {value!r}" in str(caught.value)


async def test_a_wait_no_replica_answers_keeps_the_job_and_warns_once(
    redis_client: Redis, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replicated_module._Shortfall, "last_s", -replicated_module.SHORT_LOG_EVERY_S)
    queue = _queue(redis_client, ReplicaWait(replicas=1, timeout_ms=30))
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="turnout.queue"):
        await queue._push(job_payload("j1", time.time() + 30))
        await queue._push(job_payload("j2", time.time() + 30))
    assert time.monotonic() - started >= 0.06, "each enqueue waited its timeout for a replica"
    assert await redis_client.zscore(keys.QUEUE, "j1") is not None
    assert await redis_client.zscore(keys.QUEUE, "j2") is not None
    shortfalls = [r for r in caplog.records if "reached 0 of 1 replicas within 30 ms" in r.getMessage()]
    assert len(shortfalls) == 1, "one warning per interval, not one per request"


async def test_a_primary_that_never_saw_the_script_runs_it(redis_client: Redis) -> None:
    queue = _queue(redis_client, ReplicaWait(replicas=1, timeout_ms=1))
    await queue._push(job_payload("before", time.time() + 30))
    await redis_client.script_flush()  # as a replica promoted after the scripts were loaded on its primary
    await queue._push(job_payload("after", time.time() + 30))
    assert await redis_client.zscore(keys.QUEUE, "after") is not None


async def test_a_job_whose_enqueue_is_in_flight_is_not_called_lost(
    redis_client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a failover the listener resubscribes and looks for its waiters' jobs; an enqueue still in
    flight (here: held by a write pause; after a failover, by the new primary's connection being made)
    must not be answered `job_lost`: its job is about to exist."""
    monkeypatch.setattr(door_module, "REQUEST_REDIS_TIMEOUT_S", 10.0)  # a loaded machine: no timeout here
    queue = _queue(redis_client, ReplicaWait(replicas=1, timeout_ms=20))
    # reads go on while writes wait: the enqueue stays in flight
    await redis_client.execute_command("CLIENT", "PAUSE", 400, "WRITE")  # type: ignore[no-untyped-call]
    submitted = asyncio.create_task(queue.submit(job_payload("in-flight", time.time() + 30)))
    await asyncio.sleep(0.1)
    assert not await redis_client.exists(keys.JOB_PREFIX + "in-flight"), "the enqueue is still in flight"
    await queue._settle_lost()  # the resubscribed listener's check
    await asyncio.sleep(0.6)  # the pause ends, the enqueue lands
    assert await redis_client.exists(keys.JOB_PREFIX + "in-flight")
    assert not submitted.done(), "still waiting for its answer, not answered job_lost"
    submitted.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await submitted
