#!lua
-- A fleet-wide circuit breaker in one Redis hash: the rules of reliable-core's breaker spec
-- (core/src/breaker/spec.rs, `step`, and CircuitBreaker in core/src/breaker/circuit.rs, which
-- carries its decisions out), for the subset a fleet breaker accepts: failures in a row and a
-- failure rate over a count window (minimum_calls), open times that grow per re-open (the core
-- computes them: ARGV[7]), and a gated half-open round of `max_in_flight` leased probes closed by
-- `successes` good probes in a row (ProbeRule::Consecutive). Each arm below names the table line
-- it encodes. The Rust test `lua_matches_the_core` drives this script and the core's
-- CircuitBreaker with the same random operations and compares every answer.
--
-- The shebang line makes Redis (7.0 or later) refuse the whole script up front when it is out of
-- memory, rather than stop it at its first write: a script either runs whole or not at all.
--
-- Time is in microseconds (Lua numbers are doubles: integers are exact below 2^53 µs, ~285
-- years). ARGV[2] = 0 reads the Redis server's clock: the store's clock is the fleet's clock.
--
-- KEYS[1] state hash, KEYS[2] probe leases (lease -> expiry), KEYS[3] window bits, KEYS[4] log.
-- ARGV: 1 op (acquire | record | batch | view), 2 now, 3 failures-in-a-row limit (0: off),
-- 4 failure rate in ppm (0: off), 5 minimum calls, 6 window calls, 7 open times by re-opens
-- ("t0,t1,...", the last one repeats), 8 probes in flight at most, 9 successes that close,
-- 10 probe lease, 11 log (1: append each answer to KEYS[4]), 12.. the op's arguments:
-- record: generation, lease, outcome (S, F or I); batch: generation, outcomes ("SFFI...").
local st, leases, ring, logk = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local op = ARGV[1]
local now = tonumber(ARGV[2])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local limit, ppm, minimum, wcalls = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local opens = {}
for t in string.gmatch(ARGV[7], '[^,]+') do opens[#opens + 1] = tonumber(t) end
local maxp, successes, lease_time = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local logging = ARGV[11] == '1'

-- States as in reliable-core: 0 closed, 1 open, 2 half-open.
local f = redis.call('HMGET', st, 'state', 'gen', 'since', 'reopens', 'consec', 'calls', 'fails', 'pos', 'succ', 'next', 'latest')
local state, gen, since, reopens = tonumber(f[1]) or 0, tonumber(f[2]) or 0, tonumber(f[3]) or 0, tonumber(f[4]) or 0
local consec, calls, fails, pos = tonumber(f[5]) or 0, tonumber(f[6]) or 0, tonumber(f[7]) or 0, tonumber(f[8]) or 0
local succ, nextl, latest = tonumber(f[9]) or 0, tonumber(f[10]) or 2, tonumber(f[11]) or 0
-- observe_now: a `now` earlier than the latest one seen counts as the latest.
if now > latest then latest = now end
now = latest

-- Integers as digits (Lua's `..` would write 1.7e+15).
local function d(x)
  return string.format('%.0f', x)
end
local function log(...)
  if logging then redis.call('RPUSH', logk, table.concat({...}, ' ')) end
end

-- go: every change of state moves the generation on and empties the probe round.
local function go(to)
  state = to
  gen = gen + 1
  succ = 0
  nextl = 2
  redis.call('DEL', leases)
end
-- Target::Trip / Target::Reopen: open for the open time after `reopens` failed rounds.
local function open()
  local t = opens[math.min(reopens + 1, #opens)]
  since = now + t
  consec = 0
  go(1)
end
-- Target::Close: counters and window cleared (no slow start: refused for a fleet breaker).
local function close()
  reopens = 0
  consec = 0
  calls, fails, pos = 0, 0, 0
  since = now
  go(0)
end
-- CountWindow::record: the last `wcalls` calls, one bit each (1: failed).
local function window(failed)
  if calls < wcalls then
    calls = calls + 1
  else
    fails = fails - redis.call('GETBIT', ring, pos)
  end
  redis.call('SETBIT', ring, pos, failed and 1 or 0)
  if failed then fails = fails + 1 end
  pos = (pos + 1) % wcalls
end
-- BreakerPolicy::window_trips (inclusive, fixed point) and consecutive_trips.
local function trips()
  if limit > 0 and consec >= limit then return true end
  return ppm > 0 and calls >= minimum and fails > 0 and fails * 1000000 >= ppm * calls
end

-- One result of the current generation (`record` checked it).
local function result(l, outcome)
  if state == 0 then
    -- closed | result: count it; trip if failures in a row or the window rate reach the limit.
    if outcome == 'I' then return end
    window(outcome == 'F')
    if outcome == 'F' then consec = consec + 1 else consec = 0 end
    if trips() then open() end
  elseif state == 2 then
    -- half-open: free the probe's slot; a lease that expired was already counted.
    if l >= 2 then
      if redis.call('HDEL', leases, l) == 0 then return end
    end
    if outcome == 'F' then
      -- half-open | result, failed, Consecutive: open again, for a longer time.
      reopens = reopens + 1
      open()
    elseif outcome == 'S' then
      -- half-open | result, good, Consecutive: `successes` in a row close it.
      succ = succ + 1
      if succ >= successes then close() end
    end
  end
  -- open | result: nothing.
end

local answer
if op == 'acquire' then
  for _ = 1, 4 do
    if state == 0 then
      -- closed | acquire: admit.
      answer = {1, gen, 0}
      break
    elseif state == 1 then
      if now < since then
        -- open | acquire, open time not over: reject with retry_after.
        answer = {3, gen, since - now}
        break
      end
      -- open | acquire, open time over: half-open (a new round), then decide again.
      consec = 0
      since = now
      go(2)
    else
      -- half-open | leases expired: Consecutive -> open again; the call is rejected as open.
      local expired = 0
      local all = redis.call('HGETALL', leases)
      for i = 1, #all, 2 do
        if tonumber(all[i + 1]) <= now then
          redis.call('HDEL', leases, all[i])
          expired = expired + 1
        end
      end
      if expired > 0 then
        reopens = reopens + 1
        open()
        answer = {3, gen, since - now}
        break
      end
      if redis.call('HLEN', leases) >= maxp then
        -- half-open | acquire, in flight = max: reject, half-open full.
        answer = {4, gen, 0}
        break
      end
      -- half-open | acquire: admit as a probe, with a lease.
      local l = nextl
      nextl = nextl + 1
      redis.call('HSET', leases, l, now + lease_time)
      answer = {2, gen, l}
      break
    end
  end
  log('acquire', d(now), d(answer[1]), d(answer[2]), d(answer[3]))
elseif op == 'record' then
  local g, l, outcome = tonumber(ARGV[12]), tonumber(ARGV[13]), ARGV[14]
  -- any | result of an older generation: nothing.
  if g == gen then result(l, outcome) end
  log('record', d(now), d(g), d(l), outcome)
  answer = {0, gen, 0}
elseif op == 'batch' then
  -- Results a process decided locally (cached mode), in its order; none is a probe.
  local g, outcomes = tonumber(ARGV[12]), ARGV[13]
  for i = 1, #outcomes do
    -- Only while closed, in the generation the process saw (the core's batch: acquire, record).
    if g ~= gen or state ~= 0 then break end
    local o = string.sub(outcomes, i, i)
    result(0, o)
    log('record', d(now), d(g), '0', o)
  end
  answer = {0, gen, 0}
elseif op == 'view' then
  answer = {0, gen, 0}
else
  return redis.error_reply('unknown op')
end

redis.call('HSET', st, 'state', state, 'gen', gen, 'since', since, 'reopens', reopens, 'consec', consec,
  'calls', calls, 'fails', fails, 'pos', pos, 'succ', succ, 'next', nextl, 'latest', latest)
-- The answer: code (0 done, 1 admitted, 2 admitted as a probe, 3 open, 4 half-open full),
-- generation, lease or retry_after (µs); then the state, until (open) and the store's now.
-- The state as the core shows it: an open breaker whose time is up reads as half-open.
local shown, ends = state, 0
if state == 1 then
  if now >= since then shown = 2 else ends = since end
end
return {answer[1], answer[2], answer[3], shown, ends, now, redis.call('HLEN', leases)}
