-- uses: common.lua, slots.lua
-- Gives our slot back and wakes the first waiter: 1, or 0 when it was not ours (an expired
-- slot of ours is cleared all the same).
local sem, holders, queue, alive = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, wake_prefix = ARGV[1], ARGV[2]

local now = now_ms()
local s = redis.call('ZSCORE', sem, token)
redis.call('ZREM', sem, token)
redis.call('HDEL', holders, token)
if not s or tonumber(s) <= now then return 0 end
wake_first(queue, alive, wake_prefix, now)
return 1
