"""The worker's side of the queue: claim and fair pick (each claim a lease), leases, delivery, the end of a job.

Owns: the Lua scripts and pipelines a doorbell worker (`turnout_worker.pickup.PushWorker`) runs
against the queue, the orgs' fair queues and the doorbell list (`keys.DOORBELL`, one entry per
queued job). A claim sets the job's lease (`keys.IN_PROGRESS_PREFIX`, `lease_s`), counts its try
and reads its envelope and Redis `TIME` in the same script, so a claimed job starts without
another round trip. Every key carries the queue's hash tag (`keys.JOBS_TAG`): each script touches
one slot. Every method raises `StateUnavailable` when Redis is unreachable. Redis layout:
`turnout.state.keys`.
Must not import: services, FastAPI, httpx, arq.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from turnout.state import keys
from turnout.state.errors import maps_state_errors
from turnout.state.script_batch import ScriptBatch

# KEYS: in-progress key, queue, try key, job key   ARGV: job id, in-progress ttl ms
# Claims one queued job that no worker holds and that is due (a re-queued one: its worker died or
# gave it back), as `_PICK` claims: its lease, its try counted, its envelope read.
# Returns {queue score, job bytes (false: expired), try, Redis TIME ms}, or false when not claimed.
_CLAIM = (
    """
local s = redis.call('zscore', KEYS[2], ARGV[1])
if not s then return false end
local t = redis.call('time')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(s) > now_ms then return false end
if not redis.call('set', KEYS[1], '1', 'PX', ARGV[2], 'NX') then return false end
local tries = 1
if not redis.call('set', KEYS[3], '1', 'EX', """
    + str(keys.RETRY_TTL_S)
    + """, 'NX') then tries = redis.call('incr', KEYS[3]) end
return {s, redis.call('get', KEYS[4]), tries, now_ms}
"""
)
"""`_CLAIM` and `_PICK` take a lease with one `SET NX PX` (no `EXISTS` first) and count a first try
with one `SET NX EX` (a re-run: `INCR`, which keeps the key's life): the fewest commands per
claim (issue: Performance, Redis work per request)."""


# KEYS: fair ring, queue, doorbell[, the doorbell entries taken for this pick (a list, deleted here)]
# ARGV: free slots, in-progress ttl ms, in-progress prefix, fair queue prefix, doorbell entries the caller popped,
#       retry prefix, job prefix
# Returns {Redis TIME ms, job id, queue score, job bytes, try, ...}: the claimed jobs, round robin
# across orgs, each with what the job's run needs (its envelope; its try counter, incremented and
# given `keys.RETRY_TTL_S`), so the job starts without another round trip. A fair-queue entry whose job
# left the queue (finished, withdrawn) or runs elsewhere is dropped on the way.
# The doorbell keeps about one entry per waiting job: the entries of the jobs claimed here (beyond
# the ones the caller popped or took into KEYS[4]) are removed, popped ones left unanswered while jobs still wait are put
# back, and all of them (stale: a withdrawn job's) go once no org has a job waiting and the count
# did not match.
_PICK = (
    """
local t = redis.call('time')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local want = tonumber(ARGV[1])
local picked = {now_ms}
local ring = redis.call('llen', KEYS[1])
local turns = want + ring
local drained = false
while #picked < 1 + 4 * want and turns > 0 do
  turns = turns - 1
  if ring == 0 then
    drained = true
    break
  end
  local org = redis.call('lpop', KEYS[1])
  ring = ring - 1
  local fair = ARGV[4] .. org
  local more = false
  while true do
    local head = redis.call('zrange', fair, 0, 1)
    if #head == 0 then break end
    local job = head[1]
    local s = redis.call('zscore', KEYS[2], job)
    if s and tonumber(s) > now_ms then
      more = true
      break
    end
    redis.call('zrem', fair, job)
    if s and redis.call('set', ARGV[3] .. job, '1', 'PX', ARGV[2], 'NX') then
      local tries = 1
      if not redis.call('set', ARGV[6] .. job, '1', 'EX', """
    + str(keys.RETRY_TTL_S)
    + """, 'NX') then tries = redis.call('incr', ARGV[6] .. job) end
      picked[#picked + 1] = job
      picked[#picked + 1] = s
      picked[#picked + 1] = redis.call('get', ARGV[7] .. job)
      picked[#picked + 1] = tries
      more = #head > 1
      break
    end
  end
  if more then
    redis.call('rpush', KEYS[1], org)
    ring = ring + 1
  end
end
local rung = tonumber(ARGV[5])
if KEYS[4] then
  local taken = redis.call('lpop', KEYS[4], 1000000)
  if taken then rung = rung + #taken end
end
local extra = (#picked - 1) / 4 - rung
if drained then
  if extra ~= 0 then redis.call('del', KEYS[3]) end
elseif extra > 0 then
  redis.call('ltrim', KEYS[3], extra, -1)
else
  for _ = 1, -extra do redis.call('lpush', KEYS[3], '1') end
end
return picked
"""
)


# KEYS: result key, in-progress key, job key, retry key, queue, then the lease sets the request
#       holds (`turnout.state.limit_store.Lease.sets`: its slots free before its ingress hears)
# ARGV: result bytes, result ttl s, reply channel, job id (its lease id too)
_DELIVER = """
for i = 6, #KEYS do redis.call('zrem', KEYS[i], ARGV[4]) end
redis.call('set', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('publish', ARGV[3], ARGV[1])
redis.call('del', KEYS[2], KEYS[3], KEYS[4])
redis.call('zrem', KEYS[5], ARGV[4])
return 1
"""

# KEYS: in-progress key, job key, try key, queue   ARGV: job id
# The end of a job that delivered no answer (it failed, timed out, was aborted, ran out of tries or
# expired): it leaves the queue for good. The ingress answers its client (503 `no_worker` once the
# job is gone at its deadline).
_DROP = """
redis.call('del', KEYS[1], KEYS[2], KEYS[3])
redis.call('zrem', KEYS[4], ARGV[1])
return 1
"""


class Picked(NamedTuple):
    """One job `_PICK` or `_CLAIM` claimed, with what its run needs.

    Attributes:
        job_id: the job's id.
        score: its queue score (run time, epoch ms).
        job: its envelope (`keys.JOB_PREFIX`), None if it expired.
        job_try: its try counter after this claim (`keys.RETRY_PREFIX`; 1: the first run).
    """

    job_id: str
    score: Any
    job: bytes | None
    job_try: int


def _picked(reply: list[Any]) -> tuple[int, list[Picked]]:
    """`_PICK`'s reply as (Redis `TIME` ms, the claimed jobs in pick order)."""
    jobs = []
    for i in range(1, len(reply), 4):
        job_id, score, job, job_try = reply[i : i + 4]
        jobs.append(
            Picked(
                job_id=job_id.decode() if isinstance(job_id, bytes) else job_id,
                score=score,
                job=job or None,
                job_try=int(job_try),
            )
        )
    return int(reply[0]), jobs


@maps_state_errors
class PickupStore:
    """The pickup scripts of one worker over `redis`.

    Args:
        redis: the worker's client.
        queue_name: the queue (`keys.QUEUE`: a sorted set scored by run time, epoch ms).
        lease_s: life of the in-progress key a claim sets, seconds (renewed by `renew_leases`; the
            worker claims with the short start lease, `turnout.core.kept_answer.START_LEASE_S`).
    """

    def __init__(self, redis: Redis, queue_name: str, lease_s: float) -> None:
        self._redis = redis
        self._queue = queue_name
        self._ttl_ms = int(lease_s * 1000)
        self._claim = redis.register_script(_CLAIM)
        self._pick = redis.register_script(_PICK)
        self._deliver = ScriptBatch(redis, redis.register_script(_DELIVER), name="turnout-deliver", send_abandoned=True)
        self._drop = redis.register_script(_DROP)

    def _pick_args(self, free: int, rung: int) -> list[Any]:
        """`_PICK`'s arguments: claim up to `free` jobs, `rung` doorbell entries popped by the caller."""
        return [
            free,
            self._ttl_ms,
            keys.IN_PROGRESS_PREFIX,
            keys.FAIR_ORG_PREFIX,
            rung,
            keys.RETRY_PREFIX,
            keys.JOB_PREFIX,
        ]

    async def pick(self, free: int, rung: int = 0) -> tuple[int, list[Picked]]:
        """Claim up to `free` jobs from the orgs' fair queues, round robin (`_PICK`), reading for each
        what its run needs (its envelope; its try counter, incremented), and account for
        the `rung` doorbell entries the caller popped (the list stays about one entry per waiting job).

        Returns:
            Redis `TIME` at the pick (epoch ms), and each claimed job in pick order.
        """
        picked = await self._pick(keys=[keys.FAIR_RING, self._queue, keys.DOORBELL], args=self._pick_args(free, rung))
        return _picked(picked)

    async def ring_and_pick(self, taken_key: str, timeout_s: int, free: int) -> tuple[int, list[Picked]]:
        """Wait up to `timeout_s` (whole seconds) for a doorbell entry and pick, in one round trip.

        One pipeline: `BLMOVE` of one entry from `keys.DOORBELL` into `taken_key` (this
        worker's `keys.doorbell_taken_key`), blocking until one comes or `timeout_s` passes,
        then `_PICK` of up to `free` jobs, which counts the entries in `taken_key` as popped
        and deletes them. Redis runs a blocked client's next command as soon as its block
        ends, so the pick follows the ring at once; it runs after a timeout too, claiming
        any job that waits without an entry. A script Redis lost (`NOSCRIPT`) is loaded and
        run again, the taken entry still counted.

        Returns:
            As `pick`: Redis `TIME` at the pick (epoch ms) and the claimed jobs.
        """
        pick_keys = [keys.FAIR_RING, self._queue, keys.DOORBELL, taken_key]
        args = self._pick_args(free, 0)
        pipe = self._redis.pipeline(transaction=False)
        pipe.blmove(keys.DOORBELL, taken_key, timeout_s, "LEFT", "RIGHT")
        pipe.evalsha(self._pick.sha, len(pick_keys), *pick_keys, *args)
        moved, picked = await pipe.execute(raise_on_error=False)
        if isinstance(moved, Exception):
            raise moved
        if isinstance(picked, NoScriptError):
            picked = await self._pick(keys=pick_keys, args=args)
        elif isinstance(picked, Exception):
            raise picked
        return _picked(picked)

    async def now_ms(self) -> int:
        """Redis `TIME` (epoch ms), one round trip."""
        seconds, micros = await self._redis.time()
        return int(seconds) * 1000 + int(micros) // 1000

    async def due(self, limit: int) -> list[str]:
        """Up to `limit` ids of the queue's jobs due by this host's clock (oldest first), held or not:
        the scan's candidates for `claim` (one `ZRANGEBYSCORE`)."""
        now_ms = int(time.time() * 1000)
        ids = await self._redis.zrangebyscore(self._queue, "-inf", now_ms, start=0, num=limit)
        return [i.decode() if isinstance(i, bytes) else str(i) for i in ids]

    async def claim(self, job_ids: Sequence[str]) -> tuple[int, list[Picked]]:
        """Claim each of `job_ids` that no worker holds and that is due (`_CLAIM`: its lease, its try
        counted, its envelope read; one job: no pipeline, no SCRIPT EXISTS).

        Returns:
            Redis `TIME` at the last claim (epoch ms; 0 when none was claimed), and the jobs claimed,
            in the order asked.
        """
        replies: list[Any]
        if len(job_ids) == 1:
            replies = [await self._claim(keys=self._claim_keys(job_ids[0]), args=[job_ids[0], self._ttl_ms])]
        else:
            async with self._redis.pipeline(transaction=False) as pipe:
                for job_id in job_ids:
                    await self._claim(keys=self._claim_keys(job_id), args=[job_id, self._ttl_ms], client=pipe)
                replies = await pipe.execute()
        claimed = [
            Picked(job_id=job_id, score=reply[0], job=reply[1] or None, job_try=int(reply[2]))
            for job_id, reply in zip(job_ids, replies)
            if reply
        ]
        now_ms = max((int(reply[3]) for reply in replies if reply), default=0)
        return now_ms, claimed

    def _claim_keys(self, job_id: str) -> list[str]:
        return [keys.IN_PROGRESS_PREFIX + job_id, self._queue, keys.RETRY_PREFIX + job_id, keys.JOB_PREFIX + job_id]

    async def renew_leases(self, leases: Mapping[str, int]) -> None:
        """Set the in-progress key of each job of `leases` (job id -> lease, ms) to live that long
        from now, in one pipeline (a no-op for a deleted key)."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for job_id, ttl_ms in leases.items():
                pipe.pexpire(keys.IN_PROGRESS_PREFIX + job_id, ttl_ms)
            await pipe.execute()

    async def answered(self, job_id: str) -> bool:
        """Whether an answer of `job_id` is stored (a re-run then makes no upstream call)."""
        return bool(await self._redis.exists(keys.result_key(job_id)))

    async def drop(self, job_id: str) -> None:
        """End `job_id` without an answer (`_DROP`): its lease, envelope and try counter deleted, out of
        the queue; it never runs again."""
        names = [keys.IN_PROGRESS_PREFIX + job_id, keys.JOB_PREFIX + job_id, keys.RETRY_PREFIX + job_id, self._queue]
        await self._drop(keys=names, args=[job_id])

    async def release(self, job_id: str) -> None:
        """Give `job_id` back (its lease deleted; it stays queued): the next scan of any worker claims it
        again (a run cut by this worker's stop)."""
        await self._redis.delete(keys.IN_PROGRESS_PREFIX + job_id)

    async def deliver(self, job_id: str, reply_to: str, result: bytes, ttl_s: int, release: Sequence[str] = ()) -> None:
        """Store and publish a job's answer (`ttl_s` seconds) and remove its queue keys, in one round trip;
        free the concurrency slots of `release` (its lease sets, the job id its member) in the same script.

        Answers that finish while one delivery is in flight go together in the next round trip
        (one pipeline of `_DELIVER` calls, each its own script run). The delivery runs in its own
        task: a caller cancelled while it waits does not withdraw an answer already handed over.
        """
        names = [
            keys.result_key(job_id),
            keys.IN_PROGRESS_PREFIX + job_id,
            keys.JOB_PREFIX + job_id,
            keys.RETRY_PREFIX + job_id,
            self._queue,
            *release,
        ]
        await self._deliver(names, [result, ttl_s, reply_to, job_id])
