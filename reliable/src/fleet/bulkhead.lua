#!lua
-- A fleet-wide bulkhead: reliable-core's static concurrency limit (core/src/limit/mod.rs,
-- `Limiter` with `LimitRule::Fixed`: admit while fewer than `max` calls are in flight), its calls
-- in flight held as leases that expire, so that the slots of a process that died come back. The
-- Rust test `bulkhead_lua_matches_the_core` drives this script and the core's limiter with the
-- same random calls and compares every answer.
--
-- Time in microseconds; ARGV[2] = 0 reads the server's clock. KEYS[1] leases (id -> expiry),
-- KEYS[2] the last lease id. ARGV: 1 op (acquire | release), 2 now, 3 max, 4 lease, 5 the lease
-- to release.
local now = tonumber(ARGV[2])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local max, lease = tonumber(ARGV[3]), tonumber(ARGV[4])
-- Leases that ran out free their slots first.
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if tonumber(all[i + 1]) <= now then redis.call('HDEL', KEYS[1], all[i]) end
end
local id, admitted = 0, 0
if ARGV[1] == 'acquire' then
  if redis.call('HLEN', KEYS[1]) < max then
    id = redis.call('INCR', KEYS[2])
    redis.call('HSET', KEYS[1], id, string.format('%.0f', now + lease))
    admitted = 1
  end
elseif ARGV[1] == 'release' then
  redis.call('HDEL', KEYS[1], ARGV[5])
else
  return redis.error_reply('unknown op')
end
return {admitted, id, redis.call('HLEN', KEYS[1]), now}
