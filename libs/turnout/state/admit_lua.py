"""The admission's Lua, as functions another script can call (SPEC §10 "Limits").

Owns: the text of three Lua functions — `admit_check(K, A)` (every scope's limits and every
hard budget's reservation checked, nothing written but expired leases dropped; returns the
decision `s`), `admit_write(K, A, s)` (an admitted decision's writes: the GCRA levels, the
reservations, the leases) and `admit_out(s)` (the reply) — over the admission's own
KEYS / ARGV slices (`K`, `A`, layout below). `turnout.state.limit_store` runs them alone
(`ADMIT`); the enqueue runs them with the job's own Lua in one script
(`turnout.state.jobs.enqueue_lua`), so a limited key's queued request costs one round trip.
Must not import: services, FastAPI, httpx.

K: per scope, 4 keys: rpm bucket, tpm bucket, lease set, stream lease set; then per hard
   budget, 2 keys: its period's spend hash, its reservation set.
A: now ms ('' = Redis TIME), lease id, lease ms, tokens, stream (0/1), window ms, concurrency
   retry ms, scope count, then per scope: rpm, tpm, max_concurrent, max_streams (0 = none),
   then per budget: ledger field, budget µUSD, worst case µUSD.
Reply (`admit_out`): {refused limit, 'budget' or '', refused scope or budget (0-based), wait ms
   (-1 never fits), now ms, spent µUSD and held µUSD of the refusing budget (else 0, 0), then per
   scope: rpm level before, rpm level after, tpm before, tpm after (-1 = no limit)}.
A reservation is a member `<lease id> <µUSD>` of the budget's set, scored by its expiry (epoch
ms): expired members are left out of the sum (`turnout.core.reserve.fits`), and dropped when there
are any. A lease set is counted first and its expired leases dropped only when it looks full
(a lease set under its limit needs no cleaning to decide: one command instead of two). A budget already
spent (spent >= budget) refuses even a request whose worst case is 0 (`turnout.core.budget.decide`):
no read of the spend is needed before the admission.
"""

from __future__ import annotations

ADMIT_FUNCTIONS = """
local function admit_longer(w, than)
  if than == -1 then return false end
  return w == -1 or w > than
end
local function admit_full(set, limit, now)
  if redis.call('zcard', set) < limit then return false end
  redis.call('zremrangebyscore', set, '-inf', now)
  return redis.call('zcard', set) >= limit
end
local function admit_meter(s, name, limit, cost, key, waits)
  if limit <= 0 then
    s.levels[#s.levels + 1] = -1
    s.levels[#s.levels + 1] = -1
    return
  end
  local st = redis.call('hmget', key, 'l', 't')
  local level = tonumber(st[1]) or 0
  local elapsed = s.now - (tonumber(st[2]) or 0)
  if elapsed > 0 then level = math.max(0, level - elapsed * limit) end
  local new = level + cost * s.W
  if cost > limit then
    waits[#waits + 1] = {name, -1}
    new = level
  elseif new > limit * s.W then
    waits[#waits + 1] = {name, math.ceil((new - limit * s.W) / limit)}
    new = level
  else
    s.writes[#s.writes + 1] = {key, new}
  end
  s.levels[#s.levels + 1] = level
  s.levels[#s.levels + 1] = new
end
local function admit_budgets(K, A, s)
  local n = s.n
  for b = 1, (#K - 4 * n) / 2 do
    local sk, rk = K[4 * n + 2 * b - 1], K[4 * n + 2 * b]
    local ba = 8 + 4 * n + 3 * (b - 1)
    local spent = math.ceil((tonumber(redis.call('hget', sk, A[ba + 1])) or 0) * 1000000 - 0.000001)
    local reserved, expired = 0, false
    local held = redis.call('zrange', rk, 0, -1, 'WITHSCORES')
    for i = 1, #held, 2 do
      if tonumber(held[i + 1]) > s.now then
        reserved = reserved + (tonumber(string.match(held[i], ' (%d+)$')) or 0)
      else
        expired = true
      end
    end
    if expired then redis.call('zremrangebyscore', rk, '-inf', s.now) end
    local budget = tonumber(A[ba + 2])
    if spent >= budget or spent + reserved + tonumber(A[ba + 3]) > budget then
      s.refused, s.scope, s.wait, s.spent, s.held = 'budget', b - 1, -1, spent, reserved
      return
    end
  end
end
local function admit_check(K, A)
  local now = tonumber(A[1])
  if A[1] == '' then
    local t = redis.call('time')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  local s = {now = now, W = tonumber(A[6]), n = tonumber(A[8]), refused = '', scope = 0, wait = 0,
             spent = 0, held = 0, levels = {}, writes = {}}
  local tokens, stream, RETRY = tonumber(A[4]), A[5] == '1', tonumber(A[7])
  for i = 1, s.n do
    local k, a = (i - 1) * 4, 8 + (i - 1) * 4
    local conc, streams = tonumber(A[a + 3]), tonumber(A[a + 4])
    local waits = {}
    if conc > 0 and admit_full(K[k + 3], conc, now) then waits[#waits + 1] = {'max_concurrent', RETRY} end
    if stream and streams > 0 and admit_full(K[k + 4], streams, now) then
      waits[#waits + 1] = {'max_streams', RETRY}
    end
    admit_meter(s, 'rpm', tonumber(A[a + 1]), 1, K[k + 1], waits)
    admit_meter(s, 'tpm', tonumber(A[a + 2]), tokens, K[k + 2], waits)
    for _, w in ipairs(waits) do
      if s.refused == '' or admit_longer(w[2], s.wait) then
        s.refused, s.scope, s.wait = w[1], i - 1, w[2]
      end
    end
  end
  if s.refused == '' then admit_budgets(K, A, s) end
  return s
end
local function admit_write(K, A, s)
  local now, n, lease_ms, stream = s.now, s.n, tonumber(A[3]), A[5] == '1'
  for _, w in ipairs(s.writes) do
    redis.call('hset', w[1], 'l', string.format('%d', w[2]), 't', string.format('%d', now))
    redis.call('pexpire', w[1], s.W)
  end
  for b = 1, (#K - 4 * n) / 2 do
    local rk = K[4 * n + 2 * b]
    redis.call('zadd', rk, now + lease_ms, A[2] .. ' ' .. A[8 + 4 * n + 3 * (b - 1) + 3])
    redis.call('pexpire', rk, lease_ms * 2)
  end
  for i = 1, n do
    local k, a = (i - 1) * 4, 8 + (i - 1) * 4
    if tonumber(A[a + 3]) > 0 then
      redis.call('zadd', K[k + 3], now + lease_ms, A[2])
      redis.call('pexpire', K[k + 3], lease_ms * 2)
    end
    if stream and tonumber(A[a + 4]) > 0 then
      redis.call('zadd', K[k + 4], now + lease_ms, A[2])
      redis.call('pexpire', K[k + 4], lease_ms * 2)
    end
  end
end
local function admit_out(s)
  local out = {s.refused, s.scope, s.wait, s.now, string.format('%d', s.spent), string.format('%d', s.held)}
  for _, v in ipairs(s.levels) do out[#out + 1] = string.format('%d', v) end
  return out
end
"""
"""Lua defining `admit_check`, `admit_write`, `admit_out` (module doc)."""

ADMIT = (
    ADMIT_FUNCTIONS
    + """
local s = admit_check(KEYS, ARGV)
if s.refused == '' then admit_write(KEYS, ARGV, s) end
return admit_out(s)
"""
)
"""The admission alone: KEYS and ARGV as `K` and `A` (module doc); replies `admit_out`."""
