"""Hard budgets reserved in the limit script: all or nothing, settled, expiring (issue #40).

Runs against the session's real `redis-server`; time is passed in (`now_ms`).
"""

from __future__ import annotations

import asyncio

import msgspec
from redis.asyncio import Redis

from turnout.core.limits import Demand, Limits, ScopeLimits
from turnout.state import keys
from turnout.state.limit_store import LimitStore, Reservation
from turnout.state.spend_store import SpendLedger

T0 = 1_700_000_000_000
PLAIN = Demand(tokens=0, stream=False, lease_ms=1_000)


def _budget(worst_micro: int, budget_micro: int = 1_000_000, org: str = "acme") -> Reservation:
    return Reservation(
        spend_key=keys.spend_key(org, "day", "2026-12-07"),
        field="key:bot",
        set_key=keys.reservation_key(org, "key:bot", "day", "2026-12-07"),
        budget_micro=budget_micro,
        worst_micro=worst_micro,
    )


async def test_reservations_admit_only_what_fits_spent_plus_held(redis_client: Redis) -> None:
    store = LimitStore(redis_client, lease_ms=1_000)
    await redis_client.hset(keys.spend_key("acme", "day", "2026-12-07"), "key:bot", "0.6")  # type: ignore[misc]
    first = await store.admit([], PLAIN, "a", reservations=[_budget(300_000)], now_ms=T0)
    assert first.budget_refused is None and first.lease.holds
    second = await store.admit([], PLAIN, "b", reservations=[_budget(200_000)], now_ms=T0)
    assert (
        second.budget_refused == 0
        and (second.spent_micro, second.held_micro) == (600_000, 300_000)
        and not second.lease.held
    )
    assert (await store.admit([], PLAIN, "c", reservations=[_budget(100_000)], now_ms=T0)).budget_refused is None


async def test_concurrent_admissions_never_hold_more_than_the_budget(redis_client: Redis) -> None:
    store = LimitStore(redis_client, lease_ms=60_000)
    answers = await asyncio.gather(
        *(store.admit([], PLAIN, f"r{i}", reservations=[_budget(240_000)]) for i in range(50))
    )
    assert sum(a.budget_refused is None for a in answers) == 4  # 4 × 0.24 ≤ 1 < 5 × 0.24


async def test_a_budget_refusal_writes_no_limit_and_a_limit_refusal_no_reservation(redis_client: Redis) -> None:
    store = LimitStore(redis_client, lease_ms=1_000)
    scopes = [ScopeLimits(kind="key", org="acme", id="bot", limits=Limits(rpm=1))]
    refused = await store.admit(scopes, PLAIN, "big", reservations=[_budget(2_000_000)], now_ms=T0)
    assert refused.budget_refused == 0
    admitted = await store.admit(scopes, PLAIN, "ok", reservations=[_budget(500_000)], now_ms=T0)
    assert admitted.verdict.admitted and admitted.budget_refused is None  # the refusal spent no rpm
    limited = await store.admit(scopes, PLAIN, "rpm", reservations=[_budget(100_000)], now_ms=T0 + 1)
    assert limited.verdict.refusal is not None and limited.verdict.refusal.limit == "rpm"
    set_key = _budget(0).set_key
    assert await redis_client.zcard(set_key) == 1  # only `ok` holds one


async def test_settled_reservation_holds_for_the_ledger_then_goes_and_a_dead_one_expires(redis_client: Redis) -> None:
    store = LimitStore(redis_client, lease_ms=1_000)
    held = await store.admit([], PLAIN, "a", reservations=[_budget(600_000)], now_ms=T0)
    await store.renew([held.lease], now_ms=T0 + 900)  # lives until T0 + 1 900
    assert (await store.admit([], PLAIN, "b", reservations=[_budget(600_000)], now_ms=T0 + 1_500)).budget_refused == 0
    await store.release(held.lease, hold_ms=100, now_ms=T0 + 1_500)  # settled: stays until T0 + 1 600
    assert (await store.admit([], PLAIN, "c", reservations=[_budget(600_000)], now_ms=T0 + 1_550)).budget_refused == 0
    assert (
        await store.admit([], PLAIN, "d", reservations=[_budget(600_000)], now_ms=T0 + 1_600)
    ).budget_refused is None
    # `d`'s process dies: nothing renews it, it is gone a lease later
    assert (await store.admit([], PLAIN, "e", reservations=[_budget(600_000)], now_ms=T0 + 2_599)).budget_refused == 0
    assert (
        await store.admit([], PLAIN, "f", reservations=[_budget(600_000)], now_ms=T0 + 2_600)
    ).budget_refused is None


async def test_tpm_charge_matches_the_pure_settlement_and_keeps_a_debt(redis_client: Redis) -> None:
    from turnout.core.limits import WINDOW_MS, Bucket, drained
    from turnout.core.reserve import charged
    from turnout.state.token_charge import TokenCharger

    scopes = [ScopeLimits(kind="key", org="acme", id="bot", limits=Limits(tpm=1_000))]
    store, charger = LimitStore(redis_client), TokenCharger(redis_client)
    demand = Demand(tokens=20, stream=False, lease_ms=1_000)
    assert (await store.admit(scopes, demand, "a", now_ms=T0)).verdict.admitted
    await charger.charge(scopes, 20, 2_000, now_ms=T0 + 100)
    level = charged(drained(Bucket(level=20 * WINDOW_MS, at_ms=T0), 1_000, T0 + 100), 20, 2_000, WINDOW_MS)
    raw = await redis_client.hmget(keys.limit_key("key", "acme", "bot", "tpm"), ["l", "t"])  # type: ignore[misc]
    assert (int(raw[0]), int(raw[1])) == (level, T0 + 100)
    # a window later the debt is still there: refused until it has drained below the capacity
    refused = await store.admit(scopes, demand, "b", now_ms=T0 + 100 + WINDOW_MS)
    assert refused.verdict.refusal is not None and refused.verdict.refusal.limit == "tpm"
    wait = refused.verdict.refusal.retry_after_ms
    assert wait is not None and wait > 0
    assert (await store.admit(scopes, demand, "c", now_ms=T0 + 100 + WINDOW_MS + wait)).verdict.admitted


async def test_a_release_after_redis_lost_its_scripts_still_settles(redis_client: Redis) -> None:
    """The release sends the settlement by its SHA (no `SCRIPT EXISTS` first); a Redis that no
    longer holds the script (restarted) gets the script itself, and the reservation is settled."""
    store = LimitStore(redis_client, lease_ms=1_000)
    held = await store.admit([], PLAIN, "a", reservations=[_budget(600_000)], now_ms=T0)
    await redis_client.script_flush()
    await store.release(held.lease, hold_ms=100, now_ms=T0 + 10)  # settled: stays until T0 + 110
    assert (await store.admit([], PLAIN, "b", reservations=[_budget(600_000)], now_ms=T0 + 109)).budget_refused == 0
    assert (await store.admit([], PLAIN, "c", reservations=[_budget(600_000)], now_ms=T0 + 110)).budget_refused is None


async def test_the_ledger_write_settles_the_reservation_with_the_cost_in_one_script(redis_client: Redis) -> None:
    """Exact settlement: the cost lands and the reservation goes in the same flush, not 10 s later."""
    store = LimitStore(redis_client, lease_ms=60_000)
    ledger = SpendLedger(redis_client, clock=lambda: 1_796_131_500.0)  # 2026-12-01
    reservation = msgspec.structs.replace(
        _budget(300_000),
        spend_key=keys.spend_key("acme", "day", "2026-12-01"),
        set_key=keys.reservation_key("acme", "key:bot", "day", "2026-12-01"),
    )
    admitted = await store.admit([], PLAIN, "a", reservations=[reservation])
    ledger.add("acme", ("org", "key:bot"), 0.12)
    ledger.settle("acme", admitted.lease.holds)
    assert await redis_client.zcard(reservation.set_key) == 1  # held until the cost is written
    assert await ledger.flush() == 4  # 2 fields x (day, month)
    assert await redis_client.zcard(reservation.set_key) == 0
    assert float(await redis_client.hget(reservation.spend_key, "key:bot")) == 0.12  # type: ignore[misc]
    await store.release(admitted.lease)  # the ingress's release after it: nothing comes back
    assert await redis_client.zcard(reservation.set_key) == 0
    room = await store.admit([], PLAIN, "b", reservations=[msgspec.structs.replace(reservation, worst_micro=880_000)])
    assert room.budget_refused is None  # 0.12 spent + 0.88 worst = the budget: fits at once


async def test_a_refused_flush_keeps_its_settlements_with_its_costs(redis_client: Redis) -> None:
    store = LimitStore(redis_client, lease_ms=60_000)
    admitted = await store.admit([], PLAIN, "a", reservations=[_budget(300_000)])
    broken = Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    ledger = SpendLedger(broken, clock=lambda: 1_796_131_500.0)
    ledger.add("acme", ("key:bot",), 0.1)
    ledger.settle("acme", admitted.lease.holds)
    ledger.settle("", admitted.lease.holds)  # no org: nothing
    assert await ledger.flush() == 0
    ledger._redis = redis_client
    assert await ledger.flush() == 2
    assert await redis_client.zcard(_budget(0).set_key) == 0
    await broken.aclose()


async def test_the_ledger_write_charges_tpm_like_the_charge_script(redis_client: Redis) -> None:
    """A queued request's `tpm` settlement goes with its worker's ledger write (issue #43): the
    bucket ends where `TokenCharger` (and `turnout.core.reserve.charged`) would put it."""
    from turnout.core.limits import WINDOW_MS, Bucket, drained
    from turnout.core.reserve import charged

    scopes = [ScopeLimits(kind="key", org="acme", id="bot", limits=Limits(tpm=1_000))]
    bucket = keys.limit_key("key", "acme", "bot", "tpm")
    demand = Demand(tokens=20, stream=False, lease_ms=1_000)
    seconds, micros = await redis_client.time()
    admitted_at = seconds * 1000 + micros // 1000
    assert (await LimitStore(redis_client).admit(scopes, demand, "a", now_ms=admitted_at)).verdict.admitted
    ledger = SpendLedger(redis_client)
    ledger.charge("acme", [(bucket, 1_000)], 2_000 - 20)  # the charge alone makes a flush
    await ledger.flush()
    level, at = (int(v) for v in await redis_client.hmget(bucket, ["l", "t"]))  # type: ignore[misc]
    assert level == charged(drained(Bucket(level=20 * WINDOW_MS, at_ms=admitted_at), 1_000, at), 20, 2_000, WINDOW_MS)
    assert level > 1_000 * WINDOW_MS  # over the capacity: a debt later requests wait out
    assert await redis_client.pttl(bucket) > WINDOW_MS  # kept until drained


async def test_a_delivery_frees_the_requests_concurrency_slots(redis_client: Redis) -> None:
    from turnout.state.jobs.pickup import PickupStore

    scopes = [ScopeLimits(kind="key", org="acme", id="bot", limits=Limits(max_concurrent=1))]
    store = LimitStore(redis_client, lease_ms=60_000)
    held = await store.admit(scopes, PLAIN, "job-1")
    assert not (await store.admit(scopes, PLAIN, "job-2")).verdict.admitted
    await PickupStore(redis_client, keys.QUEUE, 1.0).deliver("job-1", "turnout:reply:x", b"answer", 60, held.lease.sets)
    assert (await store.admit(scopes, PLAIN, "job-3")).verdict.admitted
