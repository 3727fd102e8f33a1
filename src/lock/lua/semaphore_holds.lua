-- uses: common.lua
-- Whether our token holds an unexpired slot: 1 or 0.
local sem = KEYS[1]
local token = ARGV[1]

local s = redis.call('ZSCORE', sem, token)
return (s and tonumber(s) > now_ms()) and 1 or 0
