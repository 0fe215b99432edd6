-- SPDX-License-Identifier: MIT
-- prelude.lua: prepended by lua2c.py to every script (gcra, fixed, window,
-- log), so the arguments all four share and the Redis TIME read are written
-- once.  Every script takes ARGV[1..3] = need, want, now (us; 0: read Redis
-- TIME, so all instances share one clock); ARGV[4..] are the script's own.
local need = tonumber(ARGV[1])
local want = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
