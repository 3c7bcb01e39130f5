#!lua
-- A fleet-wide rate limit: reliable-core's RateLimiter (core/src/limit/rate.rs), the GCRA in
-- its virtual-scheduling form, on one number, the theoretical arrival time `tat` of the next
-- call. With tau = interval * (burst - 1): admit when max(tat, now) - now <= tau and move tat to
-- max(tat, now) + interval; otherwise refuse, retry_after = max(tat, now) - tau - now. The Rust
-- test `rate_lua_matches_the_core` drives this script and the core's limiter with the same
-- random calls and compares every answer.
--
-- Time in microseconds; ARGV[1] = 0 reads the server's clock. KEYS[1] the tat.
-- ARGV: 1 now, 2 interval, 3 tau.
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local interval, tau = tonumber(ARGV[2]), tonumber(ARGV[3])
local tat = math.max(tonumber(redis.call('GET', KEYS[1])) or 0, now)
local ahead = tat - now
if ahead > tau then
  return {0, ahead - tau, now}
end
-- The key outlives its meaning by a second: a limiter nobody calls leaves nothing behind.
redis.call('SET', KEYS[1], string.format('%.0f', tat + interval), 'PX', math.ceil((tat + interval - now) / 1000) + 1000)
return {1, 0, now}
