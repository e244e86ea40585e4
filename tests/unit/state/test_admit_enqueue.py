"""A limited key's admission in the enqueue's own script writes nothing unless both the limits
and the queue take the job (issue #43: limits and budgets in the same round trip); that it
decides as `turnout.core.limits.decide` is `test_limit_store_contract`'s.

Runs against the session's real `redis-server`; the admission's time is passed in.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from support.admit_enqueue import admit_enqueue
from turnout.core.limits import Demand, Limits, ScopeLimits
from turnout.state import keys
from turnout.state.limit_store import Admission, LimitStore, Reservation

T0 = 1_700_000_000_000


async def _admit_enqueue(
    redis: Redis, store: LimitStore, scopes: list[ScopeLimits], demand: Demand, job_id: str, now_ms: int, **kw: Any
) -> tuple[int, Admission | None]:
    call = store.call(scopes, demand, job_id, now_ms=now_ms, reservations=kw.get("reservations", ()))
    return await admit_enqueue(redis, call, max_depth=kw.get("max_depth", 1_000))


async def test_a_full_queue_writes_no_admission_and_a_refusal_queues_no_job(redis_client: Redis) -> None:
    store = LimitStore(redis_client, lease_ms=2_000)
    scopes = [ScopeLimits(kind="key", org="acme", id="k", limits=Limits(rpm=1, max_concurrent=5))]
    plain = Demand(tokens=0, stream=False, lease_ms=2_000)
    added, got = await _admit_enqueue(redis_client, store, scopes, plain, "full", T0, max_depth=0)
    assert (added, got) == (-1, None)
    assert await redis_client.zcard(keys.limit_key("key", "acme", "k", "conc")) == 0
    assert not await redis_client.exists(keys.limit_key("key", "acme", "k", "rpm"))
    added, got = await _admit_enqueue(redis_client, store, scopes, plain, "first", T0)
    assert added == 1 and got is not None and got.verdict.admitted
    added, got = await _admit_enqueue(redis_client, store, scopes, plain, "second", T0 + 10)
    assert added == 2 and got is not None and got.verdict.refusal is not None
    assert await redis_client.zcard(keys.QUEUE) == 1
    assert not await redis_client.exists(keys.JOB_PREFIX + "second")


async def test_a_budget_refusal_in_the_composed_script_names_what_was_spent(redis_client: Redis) -> None:
    store = LimitStore(redis_client, lease_ms=2_000)
    spend, reserved = "turnout:spend:acme:day:x", "turnout:reservations:acme:x"
    await redis_client.hset(spend, "org", "0.9")  # type: ignore[misc]
    budget = Reservation(spend_key=spend, field="org", set_key=reserved, budget_micro=1_000_000, worst_micro=200_000)
    plain = Demand(tokens=0, stream=False, lease_ms=2_000)
    added, got = await _admit_enqueue(redis_client, store, [], plain, "b", T0, reservations=[budget])
    assert added == 2 and got is not None
    assert (got.budget_refused, got.spent_micro, got.held_micro) == (0, 900_000, 0)
    assert await redis_client.zcard(keys.QUEUE) == 0
