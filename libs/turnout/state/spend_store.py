"""The spend ledger in Redis (SPEC §10 "Spend ledger").

Owns: adding attempt costs to the ledger of each scope (org, squad, key) for
each period (UTC day and month, `turnout.core.spend`) with atomic
increments, and reading an org's ledger. Costs are summed in memory per
(org, period, field) and flushed in one pipelined round trip every
`flush_interval_s` (HINCRBYFLOAT: N processes adding at once lose nothing);
a flush Redis refuses keeps its sums for the next one.
Must not import: services, FastAPI, httpx.

Redis layout (names in `turnout.state.keys`):
    turnout:spend:{org}:{day|month}:{period id}
        hash {org: USD, squad:<name>: USD, key:<name>: USD}; expires
        `RETENTION_S[period]` after its last write
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from turnout.core.spend import KEY_PREFIX, ORG_FIELD, PERIODS, SQUAD_PREFIX, Period, period_bounds, period_id
from turnout.state import keys
from turnout.state.errors import maps_state_errors
from turnout.state.flusher import Flusher

log = logging.getLogger("turnout.spend")

RETENTION_S: dict[Period, int] = {"day": 40 * 86_400, "month": 400 * 86_400}
"""How long a period's ledger is kept after its last write."""


@maps_state_errors
class SpendLedger:
    """Adds costs to the ledger and reads it back.

    Args:
        redis: the process's client.
        flush_interval_s: longest a cost waits in memory before it is written.
        clock: epoch seconds (which period a cost falls in).
    """

    def __init__(self, redis: Redis, *, flush_interval_s: float = 0.25, clock: Callable[[], float] = time.time) -> None:
        self._redis = redis
        self._clock = clock
        self._pending: dict[tuple[str, Period, str], float] = {}
        self._flusher = Flusher(self.flush, interval_s=flush_interval_s, name="turnout-spend-flush")

    def add(self, org: str, fields: tuple[str, ...], cost_usd: float, at_s: float | None = None) -> None:
        """Add `cost_usd` to each of `fields` (`turnout.core.spend.scope_fields`) of `org`,
        in every period `at_s` (default now) falls in. Never blocks; zero costs are ignored."""
        if cost_usd <= 0 or not org:
            return
        when = self._clock() if at_s is None else at_s
        for period in PERIODS:
            hash_key = keys.spend_key(org, period, period_id(period, when))
            for field in fields:
                slot = (hash_key, period, field)
                self._pending[slot] = self._pending.get(slot, 0.0) + cost_usd

    async def flush(self) -> int:
        """Write the pending sums in one round trip. Returns the increments written
        (0 when Redis refused them: they are kept for the next flush)."""
        if not self._pending:
            return 0
        batch, self._pending = self._pending, {}
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for (hash_key, _, field), usd in batch.items():
                    pipe.hincrbyfloat(hash_key, field, usd)
                for hash_key, period in {(k, p) for k, p, _ in batch}:
                    pipe.expire(hash_key, RETENTION_S[period])
                await pipe.execute()
        except (RedisError, OSError) as exc:
            for slot, usd in batch.items():
                self._pending[slot] = self._pending.get(slot, 0.0) + usd
            log.warning("spend not written (%s); kept for the next flush", type(exc).__name__)
            return 0
        return len(batch)

    async def spent(self, org: str, field: str, period: Period, at_s: float) -> float:
        """What `field` of `org` (`turnout.core.spend.scope_fields`) spent in the
        period `at_s` falls in, USD (what is written: up to one flush interval behind).

        Raises:
            StateUnavailable: Redis is unreachable.
        """
        value = await self._redis.hget(keys.spend_key(org, period, period_id(period, at_s)), field)  # type: ignore[misc]
        return float(value) if value is not None else 0.0

    async def read(self, org: str, period: Period, at_s: float) -> dict[str, Any]:
        """The ledger of `org` for the period `at_s` falls in.

        Returns:
            `{"org", "period", "period_id", "starts_at", "resets_at" (epoch s),
            "total_usd", "squads": {name: USD}, "keys": {name: USD}}`.

        Raises:
            StateUnavailable: Redis is unreachable.
        """
        pid = period_id(period, at_s)
        raw: dict[Any, Any] = await self._redis.hgetall(keys.spend_key(org, period, pid))  # type: ignore[misc]
        values = {(k.decode() if isinstance(k, bytes) else k): float(v) for k, v in raw.items()}
        start, end = period_bounds(period, at_s)
        return {
            "org": org,
            "period": period,
            "period_id": pid,
            "starts_at": start,
            "resets_at": end,
            "total_usd": round(values.get(ORG_FIELD, 0.0), 10),
            "squads": {k[len(SQUAD_PREFIX) :]: round(v, 10) for k, v in values.items() if k.startswith(SQUAD_PREFIX)},
            "keys": {k[len(KEY_PREFIX) :]: round(v, 10) for k, v in values.items() if k.startswith(KEY_PREFIX)},
        }

    def start(self) -> None:
        """Start the background flusher on the running loop."""
        self._flusher.start()

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the flusher and write what is pending (up to `timeout_s`)."""
        await self._flusher.stop(timeout_s)
        if self._pending:
            log.warning("spend of %d ledger entries lost at shutdown", len(self._pending))
