-- uses: common.lua, slots.lua
-- Sets our slot's expiry to TTL from now: 1, or 0 when the slot is not ours (gone, expired).
-- A place in use keeps the fence counter RETENTION ms more (0: as it is), as renew.lua does;
-- with PHASES (KEYS[4]) and ARGV from 4 on, the run's phase rides along (keep_phase).
local sem, holders, fence_key, phases = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, ttl, retention = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

local now = now_ms()
local s = redis.call('ZSCORE', sem, token)
if not s or tonumber(s) <= now then return 0 end
redis.call('ZADD', sem, 'XX', now + ttl, token)
keep_semaphore(sem, holders, now)
if retention > 0 and redis.call('PTTL', fence_key) >= 0 then
  redis.call('PEXPIRE', fence_key, retention)
end
keep_phase(phases, token, ARGV, 4, ttl, now)
return 1
