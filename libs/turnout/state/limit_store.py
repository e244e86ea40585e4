"""Limits in Redis: one Lua call admits or refuses a request (SPEC §10 "Limits").

Owns: the Redis side of `turnout.core.limits` — per scope, a GCRA bucket
for `rpm` and one for `tpm` (hashes `{l: level unit·ms, t: epoch ms}`) and
a sorted set of leases for `max_concurrent` and one for `max_streams`
(member = lease id, score = expiry epoch ms); the admission script, which
checks every scope and then writes all of them or none; lease renewal and
release (`turnout.state.lease_keeper` renews the leases an ingress holds); and the
reservations of hard budgets, checked and written in the same script.
Must not import: services, FastAPI, httpx.

The script computes exactly what `turnout.core.limits.decide` computes (a
contract test runs both on the same sequences); the time is Redis `TIME`,
so ingresses need not agree on their clocks.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import msgspec
from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from turnout.core.limits import (
    CONCURRENCY_RETRY_MS,
    WINDOW_MS,
    Demand,
    LimitName,
    Quota,
    Refusal,
    ScopeLimits,
    Verdict,
    quota,
    tightest,
)
from turnout.core.reserve import SETTLE_HOLD_MS
from turnout.state import keys
from turnout.state.errors import maps_state_errors

log = logging.getLogger("turnout.limits")


def now_ms_lua(arg: int | str) -> str:
    """Lua setting `now` (epoch ms) from `ARGV[arg]`, or from Redis `TIME` when that is ''."""
    return (
        f"local now = tonumber(ARGV[{arg}])\n"
        f"if ARGV[{arg}] == '' then\n"
        "  local t = redis.call('time')\n"
        "  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
        "end\n"
    )


# KEYS: per scope, 4 keys: rpm bucket, tpm bucket, lease set, stream lease set;
#       then per hard budget, 2 keys: its period's spend hash, its reservation set
# ARGV: now ms ('' = Redis TIME), lease id, lease ms, tokens, stream (0/1), window ms,
#       concurrency retry ms, scope count, then per scope: rpm, tpm, max_concurrent,
#       max_streams (0 = none), then per budget: ledger field, budget µUSD, worst case µUSD
# Returns: {refused limit, 'budget' or '', refused scope or budget (0-based), wait ms (-1 never
#           fits), now ms, spent µUSD and held µUSD of the refusing budget (else 0, 0),
#           then per scope: rpm level before, rpm level after, tpm before, tpm after (-1 = no limit)}
# A reservation is a member `<lease id> <µUSD>` of the budget's set, scored by its expiry
# (epoch ms): expired members are dropped before the sum (`turnout.core.reserve.fits`).
_ADMIT = (
    now_ms_lua(1)
    + """
local lease_ms = tonumber(ARGV[3])
local tokens = tonumber(ARGV[4])
local stream = ARGV[5] == '1'
local W = tonumber(ARGV[6])
local RETRY = tonumber(ARGV[7])
local n = tonumber(ARGV[8])
local refused, refused_scope, refused_wait = '', 0, 0
local levels = {}
local writes = {}
local function longer(w, than)
  if than == -1 then return false end
  return w == -1 or w > than
end
for i = 1, n do
  local k = (i - 1) * 4
  local a = 8 + (i - 1) * 4
  local rpm, tpm = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local conc, streams = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
  local waits = {}
  if conc > 0 then
    redis.call('zremrangebyscore', KEYS[k + 3], '-inf', now)
    if redis.call('zcard', KEYS[k + 3]) >= conc then waits[#waits + 1] = {'max_concurrent', RETRY} end
  end
  if stream and streams > 0 then
    redis.call('zremrangebyscore', KEYS[k + 4], '-inf', now)
    if redis.call('zcard', KEYS[k + 4]) >= streams then waits[#waits + 1] = {'max_streams', RETRY} end
  end
  local meters = {{'rpm', rpm, 1, KEYS[k + 1]}, {'tpm', tpm, tokens, KEYS[k + 2]}}
  for j = 1, 2 do
    local name, limit, cost, key = meters[j][1], meters[j][2], meters[j][3], meters[j][4]
    if limit > 0 then
      local st = redis.call('hmget', key, 'l', 't')
      local level = tonumber(st[1]) or 0
      local elapsed = now - (tonumber(st[2]) or 0)
      if elapsed > 0 then
        level = math.max(0, level - elapsed * limit)
      end
      local capacity = limit * W
      local new = level + cost * W
      if cost > limit then
        waits[#waits + 1] = {name, -1}
        new = level
      elseif new > capacity then
        waits[#waits + 1] = {name, math.ceil((new - capacity) / limit)}
        new = level
      else
        writes[#writes + 1] = {key, new}
      end
      levels[#levels + 1] = level
      levels[#levels + 1] = new
    else
      levels[#levels + 1] = -1
      levels[#levels + 1] = -1
    end
  end
  for _, w in ipairs(waits) do
    if refused == '' or longer(w[2], refused_wait) then
      refused, refused_scope, refused_wait = w[1], i - 1, w[2]
    end
  end
end
local nb = (#KEYS - 4 * n) / 2
local b_spent, b_held = 0, 0
if refused == '' then
  for b = 1, nb do
    local sk, rk = KEYS[4 * n + 2 * b - 1], KEYS[4 * n + 2 * b]
    local ba = 8 + 4 * n + 3 * (b - 1)
    local spent = math.ceil((tonumber(redis.call('hget', sk, ARGV[ba + 1])) or 0) * 1000000 - 0.000001)
    redis.call('zremrangebyscore', rk, '-inf', now)
    local reserved = 0
    for _, m in ipairs(redis.call('zrange', rk, 0, -1)) do
      reserved = reserved + (tonumber(string.match(m, ' (%d+)$')) or 0)
    end
    if spent + reserved + tonumber(ARGV[ba + 3]) > tonumber(ARGV[ba + 2]) then
      refused, refused_scope, refused_wait, b_spent, b_held = 'budget', b - 1, -1, spent, reserved
      break
    end
  end
end
if refused == '' then
  for _, w in ipairs(writes) do
    redis.call('hset', w[1], 'l', string.format('%d', w[2]), 't', string.format('%d', now))
    redis.call('pexpire', w[1], W)
  end
  for b = 1, nb do
    local rk = KEYS[4 * n + 2 * b]
    redis.call('zadd', rk, now + lease_ms, ARGV[2] .. ' ' .. ARGV[8 + 4 * n + 3 * (b - 1) + 3])
    redis.call('pexpire', rk, lease_ms * 2)
  end
  for i = 1, n do
    local k = (i - 1) * 4
    local a = 8 + (i - 1) * 4
    if tonumber(ARGV[a + 3]) > 0 then
      redis.call('zadd', KEYS[k + 3], now + lease_ms, ARGV[2])
      redis.call('pexpire', KEYS[k + 3], lease_ms * 2)
    end
    if stream and tonumber(ARGV[a + 4]) > 0 then
      redis.call('zadd', KEYS[k + 4], now + lease_ms, ARGV[2])
      redis.call('pexpire', KEYS[k + 4], lease_ms * 2)
    end
  end
end
local out = {refused, refused_scope, refused_wait, now, string.format('%d', b_spent), string.format('%d', b_held)}
for _, v in ipairs(levels) do out[#out + 1] = string.format('%d', v) end
return out
"""
)

# KEYS: lease sets   ARGV: lease id, lease ms, now ms ('' = Redis TIME)
_RENEW = (
    now_ms_lua(3)
    + """
local lease_ms = tonumber(ARGV[2])
for _, key in ipairs(KEYS) do
  if redis.call('zadd', key, 'XX', 'CH', now + lease_ms, ARGV[1]) == 1 then
    redis.call('pexpire', key, lease_ms * 2)
  end
end
return 1
"""
)


# KEYS: reservation sets   ARGV: member per key..., hold ms, now ms ('' = Redis TIME)
# Each member's expiry becomes now + hold (if it is still there); the set lives at least as long.
_SETTLE = (
    now_ms_lua("#ARGV")
    + """
local hold = tonumber(ARGV[#ARGV - 1])
for i, key in ipairs(KEYS) do
  if redis.call('zadd', key, 'XX', 'CH', now + hold, ARGV[i]) == 1 and redis.call('pttl', key) < hold * 2 then
    redis.call('pexpire', key, hold * 2)
  end
end
return 1
"""
)


class Reservation(msgspec.Struct, frozen=True, kw_only=True):
    """A hard budget a request reserves its worst case against (`turnout.core.reserve`).

    Attributes:
        spend_key: the spend ledger hash of the budget's current period.
        field: the ledger field the budget counts (`org`, `squad:<name>`, `key:<name>`).
        set_key: the budget's reservation set (`keys.reservation_key`).
        budget_micro: the budget, µUSD (`micro_usd_down`).
        worst_micro: the request's worst case, µUSD (`micro_usd_up`).
    """

    spend_key: str
    field: str
    set_key: str
    budget_micro: int
    worst_micro: int


class Lease(msgspec.Struct, frozen=True, kw_only=True):
    """Concurrency slots and budget reservations one admitted request holds (both empty: none).

    Attributes:
        id: the lease id (the request id).
        sets: the lease sets it is a member of.
        holds: (reservation set, member) of each budget reservation.
    """

    id: str
    sets: tuple[str, ...] = ()
    holds: tuple[tuple[str, str], ...] = ()

    @property
    def held(self) -> bool:
        """True when the lease holds anything to renew and release."""
        return bool(self.sets or self.holds)


class Admission(msgspec.Struct, frozen=True, kw_only=True):
    """The store's answer: the verdict, the lease an admitted request holds, and for a
    request refused by a budget, which one (index into the reservations) and what its
    budget had spent and what requests in flight held then (µUSD)."""

    verdict: Verdict
    lease: Lease
    budget_refused: int | None = None
    spent_micro: int = 0
    held_micro: int = 0


def keys_of(scope: ScopeLimits, family: str = "") -> list[str]:
    """The scope's counters: rpm bucket, tpm bucket, lease set, stream lease set (`family`
    prefixed to their names: a route with counters of its own, `count:` for count_tokens)."""
    counters = ("rpm", "tpm", "conc", "streams")
    return [keys.limit_key(scope.kind, scope.org, scope.id, family + counter) for counter in counters]


@maps_state_errors
class LimitStore:
    """Admission, renewal and release of limits in Redis.

    Args:
        redis: the process's client.
        lease_ms: how long a concurrency slot lives unless renewed; a slot
            whose ingress died is free again within this long.
    """

    def __init__(self, redis: Redis, *, lease_ms: int = 30_000) -> None:
        self._redis = redis
        self.lease_ms = lease_ms
        self._admit = redis.register_script(_ADMIT)
        self._renew = redis.register_script(_RENEW)
        self._settle = redis.register_script(_SETTLE)

    async def admit(
        self,
        scopes: Sequence[ScopeLimits],
        demand: Demand,
        lease_id: str,
        *,
        reservations: Sequence[Reservation] = (),
        family: str = "",
        now_ms: int | None = None,
    ) -> Admission:
        """Admit or refuse a request against every scope's limits in one Lua call.

        Args:
            scopes: the limits that apply (org, squad, key order).
            demand: what the request asks (`demand.lease_ms` is ignored:
                the store's `lease_ms` applies).
            lease_id: unique per request (the request id).
            reservations: the hard budgets to reserve the worst case against (all or none).
            family: the counters' family (`keys_of`): "" for model calls.
            now_ms: the time to decide at, epoch ms; None = Redis `TIME`.

        Raises:
            StateUnavailable: Redis unreachable (the caller decides what that means).
        """
        key_list: list[str] = []
        args: list[str | int] = [
            "" if now_ms is None else now_ms,
            lease_id,
            self.lease_ms,
            demand.tokens,
            int(demand.stream),
            WINDOW_MS,
            CONCURRENCY_RETRY_MS,
            len(scopes),
        ]
        for scope in scopes:
            key_list += keys_of(scope, family)
            lim = scope.limits
            args += [lim.rpm or 0, lim.tpm or 0, lim.max_concurrent or 0, lim.max_streams or 0]
        for reservation in reservations:
            key_list += [reservation.spend_key, reservation.set_key]
            args += [reservation.field, reservation.budget_micro, reservation.worst_micro]
        raw = await self._admit(keys=key_list, args=args)
        refused, scope_index, wait_ms = _text(raw[0]), int(raw[1]), int(raw[2])
        levels = [int(v) for v in raw[6:]]
        admitted = refused == ""
        pick = 1 if admitted else 0
        meters: dict[str, list[Quota]] = {"rpm": [], "tpm": []}
        for i, scope in enumerate(scopes):
            for j, (name, limit) in enumerate((("rpm", scope.limits.rpm), ("tpm", scope.limits.tpm))):
                if limit is not None:
                    meters[name].append(quota(levels[i * 4 + j * 2 + pick], limit))
        refusal = None
        if refused == "budget":
            verdict = Verdict(refusal=None, requests=tightest(meters["rpm"]), tokens=tightest(meters["tpm"]))
            return Admission(
                verdict=verdict,
                lease=Lease(id=lease_id),
                budget_refused=scope_index,
                spent_micro=int(raw[4]),
                held_micro=int(raw[5]),
            )
        if not admitted:
            limit_name: LimitName = refused  # type: ignore[assignment]
            refusal = Refusal(limit=limit_name, scope=scope_index, retry_after_ms=None if wait_ms < 0 else wait_ms)
        verdict = Verdict(refusal=refusal, requests=tightest(meters["rpm"]), tokens=tightest(meters["tpm"]))
        sets: list[str] = []
        if admitted:
            for scope in scopes:
                conc_key, streams_key = keys_of(scope, family)[2:]
                if scope.limits.max_concurrent is not None:
                    sets.append(conc_key)
                if demand.stream and scope.limits.max_streams is not None:
                    sets.append(streams_key)
        holds = tuple((r.set_key, f"{lease_id} {r.worst_micro}") for r in reservations)
        return Admission(verdict=verdict, lease=Lease(id=lease_id, sets=tuple(sets), holds=holds))

    async def renew(self, leases: Sequence[Lease], *, now_ms: int | None = None) -> None:
        """Push each lease's expiry to now + `lease_ms`, in one round trip (a released lease stays released).

        Raises:
            StateUnavailable: Redis unreachable.
        """
        held = [lease for lease in leases if lease.held]
        if not held:
            return
        now_arg = "" if now_ms is None else now_ms
        async with self._redis.pipeline(transaction=False) as pipe:
            for lease in held:
                if lease.sets:
                    await self._renew(keys=list(lease.sets), args=[lease.id, self.lease_ms, now_arg], client=pipe)
                for set_key, member in lease.holds:
                    await self._renew(keys=[set_key], args=[member, self.lease_ms, now_arg], client=pipe)
            await pipe.execute()

    async def release(self, lease: Lease, *, hold_ms: int = SETTLE_HOLD_MS, now_ms: int | None = None) -> None:
        """Free a lease's slots and settle its reservations (the request's answer has been sent).

        A reservation stays `hold_ms` more (`turnout.core.reserve.SETTLE_HOLD_MS`): by then the
        request's actual cost is in the spend ledger, which it stood for until then.

        Raises:
            StateUnavailable: Redis unreachable (the slots and reservations then expire with the lease).
        """
        if not lease.held:
            return
        settle_keys = [k for k, _ in lease.holds]
        settle_args: list[Any] = [
            *(member for _, member in lease.holds),
            hold_ms,
            "" if now_ms is None else now_ms,
        ]
        async with self._redis.pipeline(transaction=False) as pipe:
            for key in lease.sets:
                pipe.zrem(key, lease.id)
            if lease.holds:  # by its SHA: a script object in a pipeline first sends SCRIPT EXISTS
                pipe.evalsha(self._settle.sha, len(settle_keys), *settle_keys, *settle_args)
            replies = await pipe.execute(raise_on_error=False)
        for reply in replies:
            if isinstance(reply, NoScriptError):  # Redis restarted: the script itself loads it
                await self._settle(keys=settle_keys, args=settle_args)
            elif isinstance(reply, Exception):
                raise reply


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
