-- SPDX-License-Identifier: MIT
-- GCRA on one key: its value is the theoretical arrival time TAT (us).
-- KEYS[1] the state key.  ARGV: need, want, now (0: Redis TIME), T (us per
-- permit), burst.  Grants g = min(want, room) permits when room >= need and
-- advances TAT by g * T at once: a lease is charged when it is granted.
-- Returns {admitted, remaining, retry_after_us, reset_us, granted, now_us}.
-- need, want and now come from prelude.lua (lua2c.py prepends it).
local T = tonumber(ARGV[4])
local burst = tonumber(ARGV[5])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
-- an old TAT (or none) means a full bucket; a TAT ahead of now is kept, so
-- a clock behind the one that wrote it only finds less room
if tat < now then tat = now end
local room = math.floor((now + burst * T - tat) / T)
if room < 0 then room = 0 end
if room < need then
  return {0, room, tat + need * T - burst * T - now, tat - now, 0, now}
end
local g = want
if g > room then g = room end
local ntat = tat + g * T
-- PX: the key lives exactly as long as it holds anything (a full bucket
-- is the same as no key)
redis.call('SET', KEYS[1], string.format('%d', ntat), 'PX',
           math.floor((ntat - now) / 1000) + 1)
return {1, room - g, 0, ntat - now, g, now}
