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
from turnout.state.admit_lua import ADMIT
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


class AdmitCall(msgspec.Struct, frozen=True, kw_only=True):
    """One admission as a script's KEYS and ARGV slice (`turnout.state.admit_lua`), and its reply's reading.

    Attributes:
        keys / args: the admission's KEYS and ARGV.
        scopes: the scopes it checks (order of the reply's levels).
        lease: what the request holds once admitted (its lease sets and reservations).
    """

    keys: list[str]
    args: list[str | int]
    scopes: tuple[ScopeLimits, ...]
    lease: Lease

    def parse(self, raw: Sequence[Any]) -> Admission:
        """The `Admission` the script's reply (`admit_out`) says."""
        refused, scope_index, wait_ms = _text(raw[0]), int(raw[1]), int(raw[2])
        levels = [int(v) for v in raw[6:]]
        admitted = refused == ""
        pick = 1 if admitted else 0
        meters: dict[str, list[Quota]] = {"rpm": [], "tpm": []}
        for i, scope in enumerate(self.scopes):
            for j, (name, limit) in enumerate((("rpm", scope.limits.rpm), ("tpm", scope.limits.tpm))):
                if limit is not None:
                    meters[name].append(quota(levels[i * 4 + j * 2 + pick], limit))
        requests, tokens = tightest(meters["rpm"]), tightest(meters["tpm"])
        if refused == "budget":
            return Admission(
                verdict=Verdict(refusal=None, requests=requests, tokens=tokens),
                lease=Lease(id=self.lease.id),
                budget_refused=scope_index,
                spent_micro=int(raw[4]),
                held_micro=int(raw[5]),
            )
        if admitted:
            return Admission(verdict=Verdict(refusal=None, requests=requests, tokens=tokens), lease=self.lease)
        limit_name: LimitName = refused  # type: ignore[assignment]
        refusal = Refusal(limit=limit_name, scope=scope_index, retry_after_ms=None if wait_ms < 0 else wait_ms)
        return Admission(
            verdict=Verdict(refusal=refusal, requests=requests, tokens=tokens), lease=Lease(id=self.lease.id)
        )


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
        self._admit = redis.register_script(ADMIT)
        self._renew = redis.register_script(_RENEW)
        self._settle = redis.register_script(_SETTLE)

    async def admit(self, scopes: Sequence[ScopeLimits], demand: Demand, lease_id: str, **options: Any) -> Admission:
        """Admit or refuse a request against every scope's limits in one Lua call (`call`'s
        arguments and options: `reservations`, `family`, `now_ms`).

        Raises:
            StateUnavailable: Redis unreachable (the caller decides what that means).
        """
        return await self.run(self.call(scopes, demand, lease_id, **options))

    async def run(self, call: AdmitCall) -> Admission:
        """Run an admission `call` (`call`) alone: `admit` in two steps.

        Raises:
            StateUnavailable: Redis unreachable.
        """
        return call.parse(await self._admit(keys=call.keys, args=call.args))

    def call(
        self,
        scopes: Sequence[ScopeLimits],
        demand: Demand,
        lease_id: str,
        *,
        reservations: Sequence[Reservation] = (),
        family: str = "",
        now_ms: int | None = None,
    ) -> AdmitCall:
        """The admission's KEYS and ARGV (`turnout.state.admit_lua`) and how to read its reply,
        for `run` or a script that runs it with its own work (the enqueue's).

        Args:
            scopes: the limits that apply (org, squad, key order).
            demand: what the request asks (`demand.lease_ms` is ignored:
                the store's `lease_ms` applies).
            lease_id: unique per request (the request id).
            reservations: the hard budgets to reserve the worst case against (all or none).
            family: the counters' family (`keys_of`): "" for model calls.
            now_ms: the time to decide at, epoch ms; None = Redis `TIME`.
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
        sets: list[str] = []
        for scope in scopes:
            scope_keys = keys_of(scope, family)
            key_list += scope_keys
            lim = scope.limits
            args += [lim.rpm or 0, lim.tpm or 0, lim.max_concurrent or 0, lim.max_streams or 0]
            if lim.max_concurrent is not None:
                sets.append(scope_keys[2])
            if demand.stream and lim.max_streams is not None:
                sets.append(scope_keys[3])
        for reservation in reservations:
            key_list += [reservation.spend_key, reservation.set_key]
            args += [reservation.field, reservation.budget_micro, reservation.worst_micro]
        holds = tuple((r.set_key, f"{lease_id} {r.worst_micro}") for r in reservations)
        return AdmitCall(
            keys=key_list, args=args, scopes=tuple(scopes), lease=Lease(id=lease_id, sets=tuple(sets), holds=holds)
        )

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
