"""The spend ledger in Redis (SPEC §10 "Spend ledger").

Owns: adding attempt costs to the ledger of each scope (org, squad, key) for
each period (UTC day and month, `turnout.core.spend`) with atomic
increments, settling the budget reservations those costs replace, and
reading an org's ledger. Costs are summed in memory per (org, period,
field) and flushed in one pipelined round trip every `flush_interval_s`:
one script per org (`_FLUSH`: HINCRBYFLOAT, so N processes adding at once
lose nothing); a flush Redis refuses keeps its sums and settlements for the
next one.
Must not import: services, FastAPI, httpx.

Exact settlement (issue #40): the process that served a request adds its
costs, then `settle`s the request's budget reservations (members of the
budget's reservation set, `turnout.state.limit_store`); the next flush
writes the costs and removes those members in the same script, so the
ledger never shows both the cost and its reservation gone missing (no
moment with neither) and the reservation total drops the moment the cost
lands. A cost flushed before its `settle` (a flush in between) is counted
twice for at most one interval: an overcount, never an undercount. The
ingress's own release keeps a reservation only `SETTLE_HOLD_MS` more, the
fallback for a process that died holding the settlement.

Redis layout (names in `turnout.state.keys`):
    turnout:spend:{org}:{day|month}:{period id}
        hash {org: USD, squad:<name>: USD, key:<name>: USD}; expires
        `RETENTION_S[period]` after its last write
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import NoScriptError, RedisError

from turnout.core.limits import WINDOW_MS
from turnout.core.spend import KEY_PREFIX, ORG_FIELD, PERIODS, SQUAD_PREFIX, Period, period_bounds, period_id
from turnout.state import keys
from turnout.state.errors import maps_state_errors
from turnout.state.flusher import Flusher
from turnout.state.token_charge import CHARGE_FUNCTION

log = logging.getLogger("turnout.spend")

RETENTION_S: dict[Period, int] = {"day": 40 * 86_400, "month": 400 * 86_400}
"""How long a period's ledger is kept after its last write."""

Hold = tuple[str, str]
"""A budget reservation a request holds: (reservation set key, member), `turnout.state.limit_store.Lease.holds`."""

# KEYS: the org's ledger hashes, then the `tpm` buckets to charge, then one reservation set per
#       member to remove
# ARGV: hash count, increment count, bucket count, window ms, then per increment: hash index
#       (1-based), field, USD; then per hash: retention s; then per bucket: its limit, token
#       difference (`token_charge.tpm_charge`); then per reservation set: its member
# Returns: the increments written.
_FLUSH = (
    CHARGE_FUNCTION
    + """
local nh, ni, nc, W = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local a = 5
for _ = 1, ni do
  redis.call('hincrbyfloat', KEYS[tonumber(ARGV[a])], ARGV[a + 1], ARGV[a + 2])
  a = a + 3
end
for h = 1, nh do
  redis.call('expire', KEYS[h], ARGV[a])
  a = a + 1
end
if nc > 0 then
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  for c = nh + 1, nh + nc do
    tpm_charge(KEYS[c], tonumber(ARGV[a]), tonumber(ARGV[a + 1]), W, now)
    a = a + 2
  end
end
for k = nh + nc + 1, #KEYS do
  redis.call('zrem', KEYS[k], ARGV[a])
  a = a + 1
end
return ni
"""
)


class _OrgBatch:
    """One org's part of a flush: its increments and the reservations they settle."""

    __slots__ = ("charges", "costs", "holds")

    def __init__(self) -> None:
        self.costs: dict[tuple[str, Period, str], float] = {}
        self.holds: list[Hold] = []
        self.charges: dict[tuple[str, int], int] = {}  # (tpm bucket, limit) -> token difference

    def script_args(self) -> tuple[list[str], list[str]]:
        """(KEYS, ARGV) of `_FLUSH` for this batch."""
        hashes = list(dict.fromkeys(k for k, _, _ in self.costs))
        index = {k: i + 1 for i, k in enumerate(hashes)}
        periods = {k: p for k, p, _ in self.costs}
        args = [str(len(hashes)), str(len(self.costs)), str(len(self.charges)), str(WINDOW_MS)]
        for (hash_key, _, field), usd in self.costs.items():
            args += [str(index[hash_key]), field, repr(usd)]
        args += [str(RETENTION_S[periods[k]]) for k in hashes]
        for (_, limit), delta in self.charges.items():
            args += [str(limit), str(delta)]
        args += [member for _, member in self.holds]
        buckets = [bucket for bucket, _ in self.charges]
        return [*hashes, *buckets, *(set_key for set_key, _ in self.holds)], args

    def merge(self, other: _OrgBatch) -> None:
        """Add `other`'s increments and settlements to this one (a refused flush's, kept)."""
        for slot, usd in other.costs.items():
            self.costs[slot] = self.costs.get(slot, 0.0) + usd
        for bucket, delta in other.charges.items():
            self.charges[bucket] = self.charges.get(bucket, 0) + delta
        self.holds.extend(other.holds)


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
        self._pending: dict[str, _OrgBatch] = {}
        self._flush_script = redis.register_script(_FLUSH)
        self._flusher = Flusher(self.flush, interval_s=flush_interval_s, name="turnout-spend-flush")

    def add(self, org: str, fields: tuple[str, ...], cost_usd: float, at_s: float | None = None) -> None:
        """Add `cost_usd` to each of `fields` (`turnout.core.spend.scope_fields`) of `org`,
        in every period `at_s` (default now) falls in. Never blocks; zero costs are ignored."""
        if cost_usd <= 0 or not org:
            return
        when = self._clock() if at_s is None else at_s
        costs = self._batch(org).costs
        for period in PERIODS:
            hash_key = keys.spend_key(org, period, period_id(period, when))
            for field in fields:
                slot = (hash_key, period, field)
                costs[slot] = costs.get(slot, 0.0) + cost_usd

    def settle(self, org: str, holds: Sequence[Hold]) -> None:
        """Remove `holds` (the budget reservations of one request of `org`, ended in this
        process) in the next flush, in the same script as the costs `add`ed before it
        (module doc "Exact settlement"). Never blocks; no holds: nothing."""
        if holds and org:
            self._batch(org).holds.extend(holds)

    def charge(self, org: str, buckets: Sequence[tuple[str, int]], delta: int) -> None:
        """Move each `tpm` bucket of `buckets` ((bucket key, its limit) of a request of `org`) by
        `delta` tokens (used − estimated, `turnout.core.reserve.charged`) in the next flush
        (`token_charge.tpm_charge`). Never blocks; no difference: nothing."""
        if not delta or not org:
            return
        charges = self._batch(org).charges
        for bucket in buckets:
            charges[bucket] = charges.get(bucket, 0) + delta

    def _batch(self, org: str) -> _OrgBatch:
        batch = self._pending.get(org)
        if batch is None:
            batch = self._pending[org] = _OrgBatch()
        return batch

    async def flush(self) -> int:
        """Write the pending sums and settlements in one round trip (one `_FLUSH` script per org).
        Returns the increments written (0 when Redis refused them: an org's sums and
        settlements Redis did not take are kept for the next flush)."""
        if not self._pending:
            return 0
        batches, self._pending = self._pending, {}
        calls = {org: batch.script_args() for org, batch in batches.items()}
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for (
                    script_keys,
                    args,
                ) in calls.values():  # by its SHA: a script object in a pipeline sends SCRIPT EXISTS
                    pipe.evalsha(self._flush_script.sha, len(script_keys), *script_keys, *args)
                replies = await pipe.execute(raise_on_error=False)
        except (RedisError, OSError) as exc:
            replies = [exc] * len(calls)
        written, refused = 0, None
        for (org, (script_keys, args)), reply in zip(calls.items(), replies):
            try:
                if isinstance(reply, NoScriptError):  # Redis restarted: the script object loads it
                    await self._flush_script(keys=script_keys, args=args, client=self._redis)
                elif isinstance(reply, BaseException):
                    raise reply
                written += len(batches[org].costs)
            except (RedisError, OSError) as exc:
                self._batch(org).merge(batches[org])
                refused = exc
        if refused is not None:
            log.warning("spend not written (%s); kept for the next flush", type(refused).__name__)
        return written

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
            lost = sum(len(batch.costs) for batch in self._pending.values())
            log.warning("spend of %d ledger entries lost at shutdown (their reservations expire)", lost)
