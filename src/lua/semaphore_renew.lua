-- uses: common.lua, slots.lua
-- Sets our slot's expiry to TTL from now: 1, or 0 when the slot is not ours (gone, expired).
local sem, holders = KEYS[1], KEYS[2]
local token, ttl = ARGV[1], tonumber(ARGV[2])

local now = now_ms()
local s = redis.call('ZSCORE', sem, token)
if not s or tonumber(s) <= now then return 0 end
redis.call('ZADD', sem, 'XX', now + ttl, token)
keep_semaphore(sem, holders, now)
return 1
