-- uses: common.lua, slots.lua
-- Gives our slot back and wakes the first waiter: 1, or 0 when it was not ours (an expired
-- slot of ours, or its tombstone, is cleared all the same). A release sent again (the reply to
-- the first was lost) finds the first in ENDS (common.lua): 1 again, and nothing changes.
local sem, holders, queue, alive, ends = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local phases = KEYS[6]  -- our run's phase (keep_phase) goes with the place
local token, wake_prefix = ARGV[1], ARGV[2]

local now = now_ms()
redis.call('HDEL', phases, token)
local s = redis.call('ZSCORE', sem, token)
redis.call('ZREM', sem, token)
redis.call('HDEL', holders, token)
if not s or tonumber(s) <= now then
  -- Our place broken by `release --force` (break_slots.lua): its tombstone waits for us to
  -- stop, and we have.
  if redis.call('ZREM', sem, 'broken-' .. token) == 1 then
    redis.call('HDEL', holders, 'broken-' .. token)
    wake_first(queue, alive, wake_prefix, now)
    return 0
  end
  return ended(ends, 'release', token, now) and 1 or 0
end
mark_ended(ends, now, 'release ' .. token)
wake_first(queue, alive, wake_prefix, now)
return 1
