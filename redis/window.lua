-- SPDX-License-Identifier: MIT
-- Bucketed sliding window on one hash: field = bucket number (now / b, b =
-- W / N), value = permits counted in it.  A decision counts the last N
-- buckets (the current one whole), so any N consecutive buckets hold at
-- most limit.  Fields of older buckets are deleted by every call: the hash
-- holds at most N + 1 fields.
-- KEYS[1] the state key.  ARGV: need, want, now (0: Redis TIME), limit, W
-- (us), N.  Returns {admitted, remaining, retry_after_us, reset_us,
-- granted, now_us}.
-- need, want and now come from prelude.lua (lua2c.py prepends it).
local limit = tonumber(ARGV[4])
local W = tonumber(ARGV[5])
local N = tonumber(ARGV[6])
local b = W / N
local e = math.floor(now / b)
local all = redis.call('HGETALL', KEYS[1])
local sum = 0
local stale = {}
local live = {}
for i = 1, #all, 2 do
  local ep = tonumber(all[i])
  local c = tonumber(all[i + 1])
  if ep <= e - N then
    stale[#stale + 1] = all[i]
  else
    sum = sum + c
    live[#live + 1] = {ep, c}
  end
end
if #stale > 0 then redis.call('HDEL', KEYS[1], unpack(stale)) end
local room = limit - sum
if room < need then
  -- the earliest bucket boundary at which enough has left the window
  table.sort(live, function(x, y) return x[1] < y[1] end)
  local left = sum
  local retry = 0
  for i = 1, #live do
    left = left - live[i][2]
    if limit - left >= need then
      retry = (live[i][1] + N) * b - now
      break
    end
  end
  local reset = 0
  if #live > 0 then reset = (live[#live][1] + N) * b - now end
  return {0, room, retry, reset, 0, now}
end
local g = want
if g > room then g = room end
redis.call('HINCRBY', KEYS[1], string.format('%d', e), g)
redis.call('PEXPIRE', KEYS[1], math.floor(((e + N) * b - now) / 1000) + 1)
return {1, room - g, 0, (e + N) * b - now, g, now}
