"""The jobs the previous version left in its key layout, adopted into the queue (rolling upgrade).

Owns: one script a worker's scan runs now and then (`PushWorker.scan`, every
`ADOPT_EVERY_SCANS` scans) that moves each job of the previous version's queue (arq's
`arq:queue`, `arq:job:<id>`, `arq:retry:<id>`, `arq:in-progress:<id>`: `keys.LEGACY_*`) that no
worker holds into this version's queue under the `{jobs}` hash tag: its envelope (the same
bytes: `envelope.encode_job` writes arq's layout) with its remaining life, its queue score and
its try counter. It is then claimed by a scan like a job whose worker died, and its answer is
published on the channel its ingress listens on (`JobPayload.reply_to`), so a job an old
ingress enqueued is served by a new worker. A job an old worker holds is left to it (it
answers, or its lease runs out and the next adoption takes it). Once the old queue is empty the
script clears the old fair ring, fair queues and doorbell.

What an old ingress waiting for an adopted job still does: it hears the answer on its channel;
its slow read of a stored answer looks at the old result key, so an answer whose message it
missed is found only by its last check at the deadline: the job's envelope is gone from the old
layout, so it answers 503 `no_worker` (or `job_lost` after it lost Redis), never hangs. A new
ingress's jobs are seen by new workers only: during an upgrade that starts the ingresses first,
their jobs wait for the first new worker and, failing one before their deadline, are answered
503 `no_worker` with Retry-After. Upgrade the workers first.

The script touches keys of two slots (the old layout has no hash tag), which only a single
Redis allows — the only setup the previous version ran on.
Must not import: services, FastAPI, httpx, arq.
"""

from __future__ import annotations

from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.errors import maps_state_errors

ADOPT_EVERY_SCANS = 5
"""A worker's scans (one per `poll_delay`, 1 s) between two adoptions while the old layout holds no job;
while it holds some (an upgrade under way), every scan adopts."""

ADOPT_BATCH = 100
"""Most old jobs one adoption moves."""

ADOPT_SCAN = 2000
"""Most old queue entries one adoption looks at (held ones are passed over; bounds the script's work)."""

# KEYS: old queue, new queue, old fair ring, old doorbell
# ARGV: batch, old job prefix, old lease prefix, old try prefix, new job prefix, new try prefix, try ttl s,
#       old fair queue prefix, entries to look at
# Returns {jobs moved, jobs left in the old queue}. With the old layout empty: ZCARD and EXISTS only.
_ADOPT = """
local function clear_old()
  if redis.call('exists', KEYS[3], KEYS[4]) > 0 then
    for _, org in ipairs(redis.call('lrange', KEYS[3], 0, -1)) do redis.call('del', ARGV[8] .. org) end
    redis.call('del', KEYS[3], KEYS[4])
  end
end
if redis.call('zcard', KEYS[1]) == 0 then
  clear_old()
  return {0, 0}
end
local moved = 0
for _, job in ipairs(redis.call('zrange', KEYS[1], 0, tonumber(ARGV[9]) - 1)) do
  if moved >= tonumber(ARGV[1]) then break end
  if redis.call('exists', ARGV[3] .. job) == 0 then
    local score = redis.call('zscore', KEYS[1], job)
    local body = redis.call('get', ARGV[2] .. job)
    local life = redis.call('pttl', ARGV[2] .. job)
    redis.call('zrem', KEYS[1], job)
    redis.call('del', ARGV[2] .. job)
    if body and life > 0 then
      redis.call('psetex', ARGV[5] .. job, life, body)
      redis.call('zadd', KEYS[2], score, job)
      local tries = redis.call('get', ARGV[4] .. job)
      if tries then redis.call('setex', ARGV[6] .. job, ARGV[7], tries) end
      moved = moved + 1
    end
    redis.call('del', ARGV[4] .. job)
  end
end
local left = redis.call('zcard', KEYS[1])
if left == 0 then clear_old() end
return {moved, left}
"""


@maps_state_errors
class LegacyJobs:
    """The adoption of the previous layout's jobs over `redis` (module doc); raises `StateUnavailable`
    when Redis is unreachable."""

    def __init__(self, redis: Redis) -> None:
        self._adopt = redis.register_script(_ADOPT)

    async def adopt(self) -> tuple[int, int]:
        """Move up to `ADOPT_BATCH` unheld jobs of the old queue into the queue (one script).

        Returns:
            How many jobs were moved (an expired or empty one is dropped, not counted), and how many
            are left in the old queue (held by old workers, or beyond this batch).
        """
        moved, left = await self._adopt(
            keys=[keys.LEGACY_QUEUE, keys.QUEUE, keys.LEGACY_FAIR_RING, keys.LEGACY_DOORBELL],
            args=[
                ADOPT_BATCH,
                keys.LEGACY_JOB_PREFIX,
                keys.LEGACY_IN_PROGRESS_PREFIX,
                keys.LEGACY_RETRY_PREFIX,
                keys.JOB_PREFIX,
                keys.RETRY_PREFIX,
                keys.RETRY_TTL_S,
                keys.LEGACY_FAIR_ORG_PREFIX,
                ADOPT_SCAN,
            ],
        )
        return int(moved), int(left)
