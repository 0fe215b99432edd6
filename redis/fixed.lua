-- SPDX-License-Identifier: MIT
-- Fixed window on one hash: w (the window number now / W) and c (its count).
-- KEYS[1] the state key.  ARGV: need, want, now (0: Redis TIME), limit, W (us).
-- Returns {admitted, remaining, retry_after_us, reset_us, granted, now_us}.
-- need, want and now come from prelude.lua (lua2c.py prepends it).
local limit = tonumber(ARGV[4])
local W = tonumber(ARGV[5])
local wid = math.floor(now / W)
local st = redis.call('HMGET', KEYS[1], 'w', 'c')
local c = 0
-- a count of another window is over: this window starts at 0
if tonumber(st[1]) == wid then c = tonumber(st[2]) end
local wend = (wid + 1) * W
local room = limit - c
if room < need then
  return {0, room, wend - now, wend - now, 0, now}
end
local g = want
if g > room then g = room end
redis.call('HSET', KEYS[1], 'w', string.format('%d', wid), 'c', string.format('%d', c + g))
redis.call('PEXPIRE', KEYS[1], math.floor((wend - now) / 1000) + 1)
return {1, room - g, 0, wend - now, g, now}
