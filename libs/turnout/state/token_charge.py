"""`tpm` settled by usage: an answer's tokens charged to the token buckets (issue #40 item 4).

Owns: the Lua script that moves each `tpm` bucket of a request's scopes by the
difference between the tokens its answer reported and the estimate admission
charged (`turnout.core.reserve.charged`; the buckets are
`turnout.state.limit_store`'s), so `tpm` bounds the tokens used whatever a
request said; a level above the capacity is a debt later requests wait out.
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

from collections.abc import Sequence

from redis.asyncio import Redis

from turnout.core.limits import WINDOW_MS, ScopeLimits
from turnout.state.errors import maps_state_errors
from turnout.state.limit_store import keys_of, now_ms_lua

CHARGE_FUNCTION = """
local function tpm_charge(key, limit, delta, W, now)
  local st = redis.call('hmget', key, 'l', 't')
  local level = tonumber(st[1]) or 0
  local elapsed = now - (tonumber(st[2]) or 0)
  if elapsed > 0 then level = math.max(0, level - elapsed * limit) end
  level = math.max(0, level + delta * W)
  redis.call('hset', key, 'l', string.format('%d', level), 't', string.format('%d', now))
  redis.call('pexpire', key, math.ceil(level / limit) + W)
end
"""
"""Lua defining `tpm_charge(bucket, limit, token difference, window ms, now ms)`: the bucket drains
to now, then moves by the difference (`turnout.core.reserve.charged`); a level above the capacity
is a debt, kept until drained. The spend ledger's flush runs it too (`turnout.state.spend_store`)."""

# KEYS: tpm buckets   ARGV: limit per key..., token difference (used − estimated), window ms,
#       now ms ('' = Redis TIME).
_CHARGE = (
    CHARGE_FUNCTION
    + now_ms_lua("#ARGV")
    + """
local n = #KEYS
for i, key in ipairs(KEYS) do tpm_charge(key, tonumber(ARGV[i]), tonumber(ARGV[n + 1]), tonumber(ARGV[n + 2]), now) end
return 1
"""
)


@maps_state_errors
class TokenCharger:
    """Settles requests' `tpm` charges in Redis.

    Args:
        redis: the process's client.
    """

    def __init__(self, redis: Redis) -> None:
        self._charge = redis.register_script(_CHARGE)

    async def charge(
        self, scopes: Sequence[ScopeLimits], estimate: int, used: int, *, now_ms: int | None = None
    ) -> None:
        """Settle a request's `tpm` charge to its answer's usage in every scope with a `tpm` limit.

        Args:
            scopes: the limits that applied to it (those without `tpm` are skipped).
            estimate: the tokens admission charged (`Demand.tokens`).
            used: the tokens its answer reported.
            now_ms: epoch ms; None = Redis `TIME`.

        Raises:
            StateUnavailable: Redis unreachable.
        """
        limited = [s for s in scopes if s.limits.tpm is not None]
        if not limited or used == estimate:
            return
        await self._charge(
            keys=[keys_of(s)[1] for s in limited],
            args=[*(s.limits.tpm or 0 for s in limited), used - estimate, WINDOW_MS, "" if now_ms is None else now_ms],
        )
