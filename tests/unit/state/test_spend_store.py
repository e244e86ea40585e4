"""The spend ledger against a real `redis-server` (SPEC §10): atomic increments, UTC periods, flush retries."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from turnout.core.spend import period_bounds, scope_fields
from turnout.state import keys
from turnout.state.spend_store import RETENTION_S, SpendLedger

NOW = 1_796_131_500.0  # 2026-12-01T13:25:00Z


async def test_ledger_sums_by_org_squad_and_key_for_the_day_and_the_month(redis_client: Redis) -> None:
    ledger = SpendLedger(redis_client, clock=lambda: NOW)
    ledger.add("acme", scope_fields("research", "ci"), 0.25)
    ledger.add("acme", scope_fields("research", "bot"), 0.5)
    ledger.add("acme", scope_fields(None, "ops"), 1.0)
    ledger.add("acme", scope_fields(None, "ops"), 0.0)  # nothing
    assert await ledger.flush() > 0
    month = await ledger.read("acme", "month", NOW)
    assert month["total_usd"] == pytest.approx(1.75)
    assert month["squads"] == {"research": pytest.approx(0.75)}
    assert month["keys"] == {"ci": pytest.approx(0.25), "bot": pytest.approx(0.5), "ops": pytest.approx(1.0)}
    assert (month["period_id"], (month["starts_at"], month["resets_at"])) == ("2026-12", period_bounds("month", NOW))
    day = await ledger.read("acme", "day", NOW)
    assert day["period_id"] == "2026-12-01" and day["total_usd"] == pytest.approx(1.75)
    assert (await ledger.read("acme", "day", NOW + 86_400))["total_usd"] == 0.0  # tomorrow starts at zero
    assert (await ledger.read("globex", "month", NOW))["total_usd"] == 0.0
    ttl = await redis_client.ttl(keys.spend_key("acme", "day", "2026-12-01"))
    assert 0 < ttl <= RETENTION_S["day"]


async def test_ledgers_of_many_processes_adding_at_once_lose_nothing(redis_client: Redis) -> None:
    ledgers = [SpendLedger(redis_client, clock=lambda: NOW) for _ in range(8)]

    async def spend(ledger: SpendLedger) -> None:
        for _ in range(50):
            ledger.add("acme", scope_fields(None, "k"), 0.01)
            await ledger.flush()

    await asyncio.gather(*(spend(ledger) for ledger in ledgers))
    assert (await ledgers[0].read("acme", "month", NOW))["total_usd"] == pytest.approx(4.0)


async def test_a_refused_flush_keeps_its_sums_for_the_next(redis_client: Redis) -> None:
    broken = Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    ledger = SpendLedger(broken, clock=lambda: NOW)
    ledger.add("acme", scope_fields(None, "k"), 0.3)
    assert await ledger.flush() == 0
    ledger._redis = redis_client  # the same ledger (its pending sums), Redis reachable again
    assert await ledger.flush() > 0
    assert (await ledger.read("acme", "month", NOW))["total_usd"] == pytest.approx(0.3)
    await broken.aclose()
