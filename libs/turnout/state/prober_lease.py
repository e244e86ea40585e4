"""The fleet's one active prober: a lease in Redis only one worker holds (issue #41 item 6).

Owns: `ProberLease`, taking and renewing the lease `keys.PROBER_KEY` (a worker's random token
with a TTL, `SET NX PX` or a compare-and-`PEXPIRE` in one Lua call) and giving it back. A
holder that dies stops renewing, and another worker takes the lease within its TTL.
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

import secrets

from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.errors import maps_state_errors

# KEYS[1] lease   ARGV[1] token, ARGV[2] ttl ms: renew our own lease, or take a free one; 1 when held
_HOLD = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
if redis.call('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[2]) then return 1 end
return 0
"""

# KEYS[1] lease   ARGV[1] token: delete only our own lease
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


@maps_state_errors
class ProberLease:
    """This worker's claim on the fleet's prober lease.

    Args:
        redis: the worker's client.
        ttl_s: the lease's lifetime (seconds); the holder renews it more often than that.
    """

    def __init__(self, redis: Redis, ttl_s: float) -> None:
        self._token = secrets.token_hex(8)
        self._ttl_ms = max(1, round(ttl_s * 1000))
        self._hold = redis.register_script(_HOLD)
        self._release = redis.register_script(_RELEASE)

    async def hold(self) -> bool:
        """Renew the lease when this worker holds it, take it when it is free: whether held now.

        Raises:
            StateUnavailable: Redis is unreachable.
        """
        return bool(await self._hold(keys=[keys.PROBER_KEY], args=[self._token, self._ttl_ms]))

    async def release(self) -> None:
        """Give the lease back (only this worker's own).

        Raises:
            StateUnavailable: Redis is unreachable (the lease then expires on its own).
        """
        await self._release(keys=[keys.PROBER_KEY], args=[self._token])
