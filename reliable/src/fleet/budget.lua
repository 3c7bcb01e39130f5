#!lua
-- A fleet-wide retry budget in one Redis hash: reliable-core's RatioBudget
-- (core/src/budget/ratio.rs, over the slot ring of core/src/ring.rs). Each first try deposits
-- `ratio`, each retry withdraws 1; both count for `ttl`, kept in `slots` slots of `ttl / slots`
-- (the window moves a slot at a time); a retry is granted while reserve + deposits >=
-- withdrawals + 1. The Rust test `lua_matches_the_core` drives this script and the core's
-- RatioBudget with the same random operations and compares every answer.
--
-- Amounts are in millionths of a retry, time in microseconds; ARGV[2] = 0 reads the server's
-- clock. KEYS[1] the hash. ARGV: 1 now, 2 deposit per first try, 3 reserve, 4 slot width,
-- 5 slots, 6 first tries to deposit first, 7 the most retries wanted (a process in cached mode
-- takes a few at once; 0 only deposits or reads).
local k = KEYS[1]
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local deposit, reserve, width, n, first, count =
  tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])

-- Ring::advance: a `now` in or before the newest slot counts as the newest; moving on clears the
-- slots passed over (all of them after a gap of `n` slots or more).
local newest = tonumber(redis.call('HGET', k, 'e')) or 0
local epoch = math.floor(now / width)
if epoch > newest then
  local from = math.max(newest + 1, epoch - n + 1)
  for e = from, epoch do
    redis.call('HDEL', k, 'a' .. (e % n), 'b' .. (e % n))
  end
  newest = epoch
  redis.call('HSET', k, 'e', newest)
end
local cur = newest % n
local a, b = 0, 0
local v = redis.call('HGETALL', k)
for i = 1, #v, 2 do
  local name = v[i]
  local c = string.sub(name, 1, 1)
  if c == 'a' then a = a + tonumber(v[i + 1]) elseif c == 'b' then b = b + tonumber(v[i + 1]) end
end

-- RatioBudget::on_first_try, `first` times.
if first > 0 then
  redis.call('HINCRBY', k, 'a' .. cur, first)
  a = a + first
end
-- RatioBudget::try_retry, `count` times or until refused.
local granted = 0
while granted < count and reserve + a * deposit >= (b + 1) * 1000000 do
  b = b + 1
  granted = granted + 1
end
if granted > 0 then redis.call('HINCRBY', k, 'b' .. cur, granted) end
-- Keys of a budget nobody uses expire with their window.
redis.call('PEXPIRE', k, math.ceil(width * n / 1000) + 1000)
-- The answer: grants, first tries and retries in the window, the store's now.
return {granted, a, b, now}
