-- SPDX-License-Identifier: MIT
-- Sliding log on a ZSET: one entry per permit, scored by its time (us); an
-- entry at t counts while now - W < t.  KEYS[1] the ZSET, KEYS[2] a counter
-- that makes every member unique (two permits in one microsecond must be two
-- entries, or the log would forget one and admit too much).  The limit is
-- at most the cap the C side checks (SLUICE_REDIS_LOG_CAP), so the ZSET
-- never holds more than that many entries.
-- ARGV: need, want, now (0: Redis TIME), limit, W (us).
-- Returns {admitted, remaining, retry_after_us, reset_us, granted, now_us}.
-- need, want and now come from prelude.lua (lua2c.py prepends it).
local limit = tonumber(ARGV[4])
local W = tonumber(ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now - W))
local c = redis.call('ZCARD', KEYS[1])
local room = limit - c
if room < need then
  -- the (need - room)-th oldest entry must leave first
  local r = redis.call('ZRANGE', KEYS[1], need - room - 1, need - room - 1, 'WITHSCORES')
  local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  local reset = 0
  if #newest > 0 then reset = tonumber(newest[2]) + W - now end
  return {0, room, tonumber(r[2]) + W - now, reset, 0, now}
end
local g = want
if g > room then g = room end
local seq = redis.call('INCRBY', KEYS[2], g)
local stamp = string.format('%d', now)
local i = 0
while i < g do
  -- at most 500 entries per ZADD: Lua's unpack has a stack limit
  local args = {}
  local j = 0
  while j < 500 and i < g do
    args[#args + 1] = stamp
    args[#args + 1] = string.format('%d', seq - g + i + 1)
    i = i + 1
    j = j + 1
  end
  redis.call('ZADD', KEYS[1], unpack(args))
end
local ttl = math.floor(W / 1000) + 1
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
return {1, room - g, 0, W, g, now}
