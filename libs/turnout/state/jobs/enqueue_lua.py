"""The enqueue's Lua: shedding at the door and putting a job on the queue, alone or behind a
limited key's admission in the same script (one round trip, issue #43).

Owns: the text of `ENQUEUE` (the job alone) and `ADMIT_ENQUEUE` (the admission of
`turnout.state.admit_lua` first, then the job's; nothing written unless both take it).
Must not import: services, FastAPI, httpx, arq.

Enqueue KEYS (6): job key, queue, result key, the org's fair queue, fair ring, doorbell.
Enqueue ARGV (8): job bytes, expiry ms, job id, max depth, fair queue prefix, org, most jobs ahead
allowed (-1: any), keyed (1: an Idempotency-Key's job, whose id may come again; 0: a fresh random
id, not looked up).
Reply: {1, 0} added, {0, 0} duplicate (keyed only), {-1, 0} queue full, {-2, jobs ahead} shed
(cannot be served in its budget). Jobs ahead: `turnout.core.queue_wait.jobs_ahead` (own org's
waiting jobs, plus per other org on the ring at most one more than that), over the first
`RING_SCAN` orgs of the ring.

`ADMIT_ENQUEUE`: KEYS the enqueue's 6 then the admission's; ARGV the enqueue's 8 then the
admission's. Reply: the enqueue's two values then the admission's reply (`admit_out`) as a
third; {2, 0, reply}: refused by a limit or a budget, nothing written (a limit's refusal
comes before the queue's: a request over its limit is told so, not that the queue is full).
"""

from __future__ import annotations

from turnout.state.admit_lua import ADMIT_FUNCTIONS

RING_SCAN = 128
"""Orgs of the fair ring the door counts when estimating a new job's wait (bounds the script's work)."""

ENQUEUE_FUNCTIONS = (
    """
local function enqueue_check(K, A)
  if A[8] == '1' and redis.call('exists', K[1], K[3]) > 0 then return 0, 0, -1 end
  if redis.call('zcard', K[2]) >= tonumber(A[4]) then return -1, 0, -1 end
  local limit = tonumber(A[7])
  local own = -1
  if limit >= 0 then
    own = redis.call('zcard', K[4])
    local ahead = own
    for _, org in ipairs(redis.call('lrange', K[5], 0, """
    + str(RING_SCAN - 1)
    + """)) do
      if org ~= A[6] then ahead = ahead + math.min(redis.call('zcard', A[5] .. org), own + 1) end
    end
    if ahead > limit then return -2, ahead, -1 end
  end
  return nil, 0, own
end
local function enqueue_write(K, A, own, now_ms)
  if not now_ms then
    local t = redis.call('time')
    now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  redis.call('psetex', K[1], A[2], A[1])
  redis.call('zadd', K[2], now_ms, A[3])
  redis.call('zadd', K[4], now_ms, A[3])
  if own < 0 then own = redis.call('zcard', K[4]) - 1 end
  if own == 0 then redis.call('rpush', K[5], A[6]) end
  redis.call('rpush', K[6], '1')
end
"""
)

ENQUEUE = (
    ENQUEUE_FUNCTIONS
    + """
local refused, ahead, own = enqueue_check(KEYS, ARGV)
if refused then return {refused, ahead} end
enqueue_write(KEYS, ARGV, own)
return {1, 0}
"""
)
"""The job alone (module doc)."""

ADMIT_ENQUEUE = (
    ADMIT_FUNCTIONS
    + ENQUEUE_FUNCTIONS
    + """
local EK, EA, AK, AA = {}, {}, {}, {}
for i = 1, #KEYS do if i <= 6 then EK[i] = KEYS[i] else AK[i - 6] = KEYS[i] end end
for i = 1, #ARGV do if i <= 8 then EA[i] = ARGV[i] else AA[i - 8] = ARGV[i] end end
local s = admit_check(AK, AA)
if s.refused ~= '' then return {2, 0, admit_out(s)} end
local refused, ahead, own = enqueue_check(EK, EA)
if refused then return {refused, ahead} end
admit_write(AK, AA, s)
enqueue_write(EK, EA, own, s.now)
return {1, 0, admit_out(s)}
"""
)
"""A limited key's admission, then the job (module doc)."""
