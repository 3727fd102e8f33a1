-- uses: common.lua, slots.lua
-- Gives our slot back and wakes the first waiter: 1, or 0 when it was not ours (an expired
-- slot of ours, or its tombstone, is cleared all the same).
local sem, holders, queue, alive = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, wake_prefix = ARGV[1], ARGV[2]

local now = now_ms()
local s = redis.call('ZSCORE', sem, token)
redis.call('ZREM', sem, token)
redis.call('HDEL', holders, token)
if not s or tonumber(s) <= now then
  -- Our place broken by `release --force` (break_slots.lua): its tombstone waits for us to
  -- stop, and we have.
  if redis.call('ZREM', sem, 'broken-' .. token) == 1 then
    redis.call('HDEL', holders, 'broken-' .. token)
    wake_first(queue, alive, wake_prefix, now)
  end
  return 0
end
wake_first(queue, alive, wake_prefix, now)
return 1
