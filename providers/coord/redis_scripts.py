"""The Lua scripts behind the Redis coordinator: each runs atomically inside Redis, so every check-and-
update of a shared limit or ledger is one step however many processes race for it.

Numbers cross as strings (Python's repr of a float round-trips exactly; Lua's tostring keeps 14
digits, so scripts format with %.17g). Time is always Redis's own (TIME): processes on machines with
different clocks agree on it. Layout and reasoning: docs/design/coordination.md.
"""

from __future__ import annotations

# Shared by the ledger scripts. A sweep's keys, under NS = "ifsweep:sweep:<id>":
#   NS:epoch          random id of this incarnation of the ledger; a script told another one answers
#                     'lost' (Redis lost its data, or the caller is behind): the caller restores first
#   NS:recovering     present for a grace period after a restore created a new epoch: reservations
#                     wait, so every live process can put its outstanding holds back first
#   NS:spent          hash "<scope>\31<writer>" -> what that writer spent in scope (absolute, only grows)
#   NS:total          hash scope -> sum of NS:spent over writers
#   NS:held, NS:holds hash scope -> dollars held / number of reservations outstanding (live instances)
#   NS:insts          set of instances that hold something
#   NS:lease:<inst>   expires unless the instance renews it; then its holds are charged to its writer:
#                     a dead process's calls in flight may have been billed (issue 27), so they count
#                     as spent at their worst case, never simply released
#   NS:res:<inst>     hash token -> JSON ["<amount>", [scopes], writer] of the instance's outstanding holds
_LEDGER_LIB = r"""
local function fmt(x) return string.format('%.17g', x) end

-- A hold charged when its instance's lease ran out, whose instance turns out alive (it renews, restores
-- or settles it): the charge is taken back, the call's own settlement counts instead.
local function unexpire(ns, inst, token)
  local key = ns .. ':charged:' .. inst
  local payload = redis.call('HGET', key, token)
  if not payload then return end
  local hold = cjson.decode(payload)
  for _, scope in ipairs(hold[2]) do
    redis.call('HINCRBYFLOAT', ns .. ':spent', scope .. '\31' .. hold[3], '-' .. hold[1])
    redis.call('HINCRBYFLOAT', ns .. ':total', scope, '-' .. hold[1])
  end
  redis.call('HDEL', key, token)
end

local function release(ns, inst, token)
  local res = ns .. ':res:' .. inst
  local payload = redis.call('HGET', res, token)
  if not payload then
    unexpire(ns, inst, token)
    return 0
  end
  local hold = cjson.decode(payload)
  for _, scope in ipairs(hold[2]) do
    if redis.call('HINCRBY', ns .. ':holds', scope, -1) <= 0 then
      -- the last hold gone: clear the float sum too, so rounding residue never looks like a hold
      redis.call('HDEL', ns .. ':holds', scope)
      redis.call('HDEL', ns .. ':held', scope)
    else
      redis.call('HINCRBYFLOAT', ns .. ':held', scope, '-' .. hold[1])
    end
  end
  redis.call('HDEL', res, token)
  return 1
end

local function add_hold(ns, inst, token, amount, scopes, writer)
  for _, scope in ipairs(scopes) do
    redis.call('HINCRBYFLOAT', ns .. ':held', scope, amount)
    redis.call('HINCRBY', ns .. ':holds', scope, 1)
  end
  redis.call('HSET', ns .. ':res:' .. inst, token, cjson.encode({amount, scopes, writer}))
  redis.call('SADD', ns .. ':insts', inst)
end

local function drop(ns, inst)
  for _, token in ipairs(redis.call('HKEYS', ns .. ':res:' .. inst)) do release(ns, inst, token) end
  redis.call('SREM', ns .. ':insts', inst)
end

-- A dead instance's holds become its writer's spend (the writer's next process publishes its total
-- from the shards, intents included, merged by maximum: the same calls, never counted twice).
local function expire(ns, inst)
  local res, charged = ns .. ':res:' .. inst, ns .. ':charged:' .. inst
  for _, token in ipairs(redis.call('HKEYS', res)) do
    local payload = redis.call('HGET', res, token)
    local hold = cjson.decode(payload)
    if hold[3] then
      for _, scope in ipairs(hold[2]) do
        redis.call('HINCRBYFLOAT', ns .. ':spent', scope .. '\31' .. hold[3], hold[1])
        redis.call('HINCRBYFLOAT', ns .. ':total', scope, hold[1])
      end
      redis.call('HSET', charged, token, payload)
      redis.call('EXPIRE', charged, 604800)
    end
    release(ns, inst, token)
  end
  redis.call('SREM', ns .. ':insts', inst)
end

local function purge(ns)
  for _, inst in ipairs(redis.call('SMEMBERS', ns .. ':insts')) do
    if redis.call('EXISTS', ns .. ':lease:' .. inst) == 0 then expire(ns, inst) end
  end
end

local function merge(ns, scope, writer, total)
  local field = scope .. '\31' .. writer
  local old = tonumber(redis.call('HGET', ns .. ':spent', field) or '0')
  local new = tonumber(total)
  if new > old then
    redis.call('HSET', ns .. ':spent', field, total)
    redis.call('HINCRBYFLOAT', ns .. ':total', scope, fmt(new - old))
  end
end

local function touch(ns, inst, ttl)
  for _, name in ipairs({'epoch', 'spent', 'total', 'held', 'holds', 'insts', 'res:' .. inst}) do
    redis.call('EXPIRE', ns .. ':' .. name, ttl)
  end
end
"""

# Reservations of one process, checked in order, each against every cap it names. ARGV: ns, epoch,
# inst, lease_ms, writer, then per reservation: token, amount, k, k (scope, cap) pairs of its capped
# scopes.
# -> {'ok', {per reservation: {'ok'} | {'no', scope, holds outstanding in scope}}} | {'wait', ms} | {'lost'}
RESERVE = (
    _LEDGER_LIB
    + r"""
local ns, inst, writer = ARGV[1], ARGV[3], ARGV[5]
if redis.call('GET', ns .. ':epoch') ~= ARGV[2] then return {'lost'} end
local grace = redis.call('PTTL', ns .. ':recovering')
if grace > 0 then return {'wait', tostring(grace)} end
redis.call('SET', ns .. ':lease:' .. inst, '1', 'PX', ARGV[4])
purge(ns)

local function reserve(token, amount, first, k)
  if redis.call('HEXISTS', ns .. ':res:' .. inst, token) == 1 then return {'ok'} end
  local want, scopes = tonumber(amount), {}
  for i = first, first + 2 * k - 1, 2 do
    local scope = ARGV[i]
    local spent = tonumber(redis.call('HGET', ns .. ':total', scope) or '0')
    local held = math.max(0, tonumber(redis.call('HGET', ns .. ':held', scope) or '0'))
    if spent + held + want > tonumber(ARGV[i + 1]) + 1e-12 then
      return {'no', scope, tostring(redis.call('HGET', ns .. ':holds', scope) or '0')}
    end
    scopes[#scopes + 1] = scope
  end
  add_hold(ns, inst, token, amount, scopes, writer)
  return {'ok'}
end

local out, i = {}, 6
while i <= #ARGV do
  local k = tonumber(ARGV[i + 2])
  out[#out + 1] = reserve(ARGV[i], ARGV[i + 1], i + 3, k)
  i = i + 3 + 2 * k
end
return {'ok', out}
"""
)

# ARGV: ns, epoch, inst, writer, n, n tokens to release, then (scope, writer's total) pairs.
# -> {'ok', released, {scope, total, ...}} | {'lost'}
SETTLE = (
    _LEDGER_LIB
    + r"""
local ns, inst, writer = ARGV[1], ARGV[3], ARGV[4]
if redis.call('GET', ns .. ':epoch') ~= ARGV[2] then return {'lost'} end
local n, released = tonumber(ARGV[5]), 0
for i = 6, 5 + n do released = released + release(ns, inst, ARGV[i]) end
for i = 6 + n, #ARGV, 2 do merge(ns, ARGV[i], writer, ARGV[i + 1]) end
if released > 0 then redis.call('PUBLISH', ns .. ':settled', released) end
return {'ok', released, redis.call('HGETALL', ns .. ':total')}
"""
)

# ARGV: ns, epoch, inst, lease_ms, ttl_s, has_holds ('1'/'0')
# -> {'ok' | 'expired', {scope, total, ...}} | {'lost'}
BEAT = (
    _LEDGER_LIB
    + r"""
local ns, inst = ARGV[1], ARGV[3]
if redis.call('GET', ns .. ':epoch') ~= ARGV[2] then return {'lost'} end
local alive = redis.call('EXISTS', ns .. ':lease:' .. inst) == 1
redis.call('SET', ns .. ':lease:' .. inst, '1', 'PX', ARGV[4])
touch(ns, inst, tonumber(ARGV[5]))
local state = 'ok'
if not alive and ARGV[6] == '1' then state = 'expired' end
return {state, redis.call('HGETALL', ns .. ':total')}
"""
)

# Put this instance's view back: after a start, a lost epoch or an expired lease. Idempotent.
# ARGV: ns, candidate epoch, grace_ms, inst, lease_ms, ttl_s, writer,
#       baseline JSON {writer: {scope: "total"}}, holds JSON [[token, "amount", [scopes]], ...]
# -> {epoch, created ('1'/'0'), {scope, this writer's published total, ...}, {scope, total, ...}}
RESTORE = (
    _LEDGER_LIB
    + r"""
local ns, inst, writer = ARGV[1], ARGV[4], ARGV[7]
local epoch, created = redis.call('GET', ns .. ':epoch'), '0'
if not epoch then
  epoch, created = ARGV[2], '1'
  redis.call('SET', ns .. ':epoch', epoch)
  if tonumber(ARGV[3]) > 0 then redis.call('SET', ns .. ':recovering', '1', 'PX', ARGV[3]) end
end
for w, scopes in pairs(cjson.decode(ARGV[8])) do
  for scope, total in pairs(scopes) do merge(ns, scope, w, total) end
end
drop(ns, inst)
for _, hold in ipairs(cjson.decode(ARGV[9])) do
  unexpire(ns, inst, hold[1])
  add_hold(ns, inst, hold[1], hold[2], hold[3], writer)
end
redis.call('SET', ns .. ':lease:' .. inst, '1', 'PX', ARGV[5])
touch(ns, inst, tonumber(ARGV[6]))
local own, suffix = {}, '\31' .. writer
local spent = redis.call('HGETALL', ns .. ':spent')
for i = 1, #spent, 2 do
  local field = spent[i]
  if #field > #suffix and string.sub(field, -#suffix) == suffix then
    own[#own + 1] = string.sub(field, 1, #field - #suffix)
    own[#own + 1] = spent[i + 1]
  end
end
return {epoch, created, own, redis.call('HGETALL', ns .. ':total')}
"""
)

# A process leaving cleanly: its holds go at once instead of when its lease runs out. ARGV: ns, inst.
LEAVE = (
    _LEDGER_LIB
    + r"""
drop(ARGV[1], ARGV[2])
redis.call('DEL', ARGV[1] .. ':lease:' .. ARGV[2])
return 'ok'
"""
)

# What the ledger holds now, dead instances dropped first. ARGV: ns.
# -> {epoch or '', {scope, total...}, {scope, held...}, {scope, holds...}, {inst, lease ms left, ...}}
SNAPSHOT = (
    _LEDGER_LIB
    + r"""
local ns = ARGV[1]
purge(ns)
local insts = {}
for _, inst in ipairs(redis.call('SMEMBERS', ns .. ':insts')) do
  insts[#insts + 1] = inst
  insts[#insts + 1] = tostring(redis.call('PTTL', ns .. ':lease:' .. inst))
end
return {redis.call('GET', ns .. ':epoch') or '', redis.call('HGETALL', ns .. ':total'),
        redis.call('HGETALL', ns .. ':held'), redis.call('HGETALL', ns .. ':holds'), insts}
"""
)

# One endpoint's allowances, key "ifsweep:rate:<hash>": GCRA in token-bucket form. For a limit L per
# minute with B seconds of burst, `tat` is when the bucket would be full again; a call needing n of the
# allowance may start once tat - B + n*60/L <= now (a call larger than the bucket waits for a full one
# and takes all it needs, leaving a debt: limits.TokenBucket's rule). For each call, in order, the
# script books the earliest start for both windows and any shared pause at once, moves both tats past
# it, and returns the wait; callers sleep it out, so no process ever asks twice for one call. One
# script serves every call a process has waiting for the endpoint: one round trip however many.
# script serves every call a process has waiting, for every endpoint: one round trip however many.
# KEYS: the endpoints. ARGV, per endpoint: rpm, tpm (0: not configured), fallback rpm, fallback tpm,
# tpm burst_s, ttl_ms, n, then the tokens of its n calls.
# -> per endpoint {rpm, tpm, learned flags "rt" (1 = the limit came from the shared store),
#    {wait_s, taken, token debt_s after the booking, ...}, the token bucket's shift so far (see SYNC)}
TAKE = r"""
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local function limit(configured, learned, fallback)
  local c = tonumber(configured)
  if c > 0 then return c, '0' end
  if learned then return tonumber(learned), '1' end
  return tonumber(fallback), '0'
end

local function book(key, a, n)
  local h = redis.call('HMGET', key, 'rtat', 'ttat', 'rlearn', 'tlearn', 'pause', 'tshift')
  local rpm, rflag = limit(ARGV[a], h[3], ARGV[a + 2])
  local tpm, tflag = limit(ARGV[a + 1], h[4], ARGV[a + 3])
  local burst = tonumber(ARGV[a + 4])
  local pause = math.max(now, tonumber(h[5] or '0'))
  local rtat, ttat = math.max(now, tonumber(h[1] or '0')), math.max(now, tonumber(h[2] or '0'))
  local out = {}
  for i = a + 7, a + 6 + n do
    local start, take = pause, 0
    if rpm > 0 then
      local per = 60 / rpm
      start = math.max(start, rtat - math.ceil(rpm / 60) * per + per)
    end
    if tpm > 0 then
      take = math.min(tonumber(ARGV[i]), tpm)
      start = math.max(start, ttat - burst + math.min(take, tpm * burst / 60) * 60 / tpm)
    end
    if rpm > 0 then rtat = math.max(rtat, start) + 60 / rpm end
    if tpm > 0 then ttat = math.max(ttat, start) + take * 60 / tpm end
    out[#out + 1] = string.format('%.17g', start - now)
    out[#out + 1] = tostring(take)
    out[#out + 1] = string.format('%.17g', ttat - start)  -- the token debt right after this booking
  end
  if rpm > 0 then redis.call('HSET', key, 'rtat', string.format('%.17g', rtat)) end
  if tpm > 0 then redis.call('HSET', key, 'ttat', string.format('%.17g', ttat)) end
  redis.call('PEXPIRE', key, ARGV[a + 5])
  return {tostring(rpm), tostring(tpm), rflag .. tflag, out, h[6] or '0'}
end

local replies, a = {}, 1
for _, key in ipairs(KEYS) do
  local n = tonumber(ARGV[a + 6])
  replies[#replies + 1] = book(key, a, n)
  a = a + 7 + n
end
return replies
"""

# Unused tokens back: the bucket's tat moves earlier, never before now; `tshift` records the move.
# ARGV: tokens, tpm.
REFUND = r"""
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local h = redis.call('HMGET', KEYS[1], 'ttat', 'tshift')
local tat = tonumber(h[1] or '0')
if tat > now then
  local back = math.max(now, tat - tonumber(ARGV[1]) * 60 / tonumber(ARGV[2]))
  -- a refund is a correction too (see SYNC): it counts against the shift
  local shift = tonumber(h[2] or '0') - (tat - back)
  redis.call('HSET', KEYS[1], 'ttat', string.format('%.17g', back), 'tshift', string.format('%.17g', shift))
end
return 'ok'
"""

# Hold every process's calls until now + seconds (later pauses win). ARGV: seconds, ttl_ms.
PAUSE = r"""
local t = redis.call('TIME')
local until_s = tonumber(t[1]) + tonumber(t[2]) / 1e6 + tonumber(ARGV[1])
if until_s > tonumber(redis.call('HGET', KEYS[1], 'pause') or '0') then
  redis.call('HSET', KEYS[1], 'pause', string.format('%.17g', until_s))
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 'ok'
"""

# A limit a provider announced, for processes with none configured. ARGV: field (rlearn | tlearn),
# limit, ttl_ms.
LEARN = r"""
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 'ok'
"""

# What the provider says remains corrects the shared token bucket. Reservations are refunded to actual
# usage, but a provider may charge more (OpenAI counts max_tokens), so the shared bucket drifts fuller
# than the provider's. A reply to call X says `remaining` after X; right after X was booked our bucket
# held capacity - debt_X*rate, so every later booking must move later by the difference. Many replies
# report the same drift: `tshift` accumulates the corrections made (refunds subtract theirs), and a
# reply only adds what was not made since X was booked.
# ARGV: remaining, capacity, per_minute, debt_X (s), tshift at X's booking, ttl_ms.
SYNC = r"""
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local h = redis.call('HMGET', KEYS[1], 'ttat', 'tshift')
local shift = tonumber(h[2] or '0')
local needed = (tonumber(ARGV[2]) - tonumber(ARGV[1])) * 60 / tonumber(ARGV[3]) - tonumber(ARGV[4])
local extra = needed - (shift - tonumber(ARGV[5]))
if extra > 0 then
  local tat = math.max(now, tonumber(h[1] or '0')) + extra
  local fmt = '%.17g'
  redis.call('HSET', KEYS[1], 'ttat', string.format(fmt, tat), 'tshift', string.format(fmt, shift + extra))
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
end
return 'ok'
"""
