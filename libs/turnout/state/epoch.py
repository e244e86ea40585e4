"""Redis epochs: telling that the Redis a process reconnects to is not the one it left.

Owns: the epoch token (`keys.EPOCH`), created once in an empty Redis (`SET NX`) and read in
the same round trip, and `EpochTracker`, which remembers the token a process last saw. A Redis
restarted without its data (no AOF, or AOF lost), a replica promoted before it had the writes,
or a flushed database has no token, or a new one another process just wrote: every process
then re-seeds what its file owns (the catalog, the orgs and keys; `turnout.state.follow`) and
checks persistence again, so valid keys keep working after a data loss. A Redis restarted with
its data keeps its token and nothing is re-written.
Every function raises `StateUnavailable` when Redis is unreachable.
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

import uuid

from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.errors import state_errors


async def read_epoch(redis: Redis) -> str:
    """The epoch of the Redis behind `redis`, creating one when it has none (one round trip).

    Raises:
        StateUnavailable: Redis is unreachable.
    """
    with state_errors():
        async with redis.pipeline(transaction=True) as pipe:
            pipe.set(keys.EPOCH, uuid.uuid4().hex, nx=True)
            pipe.get(keys.EPOCH)
            _, token = await pipe.execute()
    return token.decode() if isinstance(token, bytes) else str(token)


class EpochTracker:
    """The epoch a process last saw; `moved` tells whether Redis changed under it."""

    def __init__(self) -> None:
        self.known: str | None = None

    async def moved(self, redis: Redis) -> bool:
        """Read the epoch (`read_epoch`); True when it is not the one seen before (False the
        first time: nothing was seen). Remembers the one read.

        Raises:
            StateUnavailable: Redis is unreachable (nothing remembered).
        """
        now = await read_epoch(redis)
        before, self.known = self.known, now
        return before is not None and before != now
