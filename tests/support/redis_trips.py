"""A redis-py asyncio client that counts its round trips (single commands and pipelines), for the
tests of what shares a round trip."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis


class CountingRedis(Redis):
    """A client that counts its round trips: single commands and pipeline executions (class-wide
    `trips`; reset it before the part a test counts)."""

    trips = 0

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        CountingRedis.trips += 1
        return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        CountingRedis.trips += 1
        return super().pipeline(transaction, shard_hint)
