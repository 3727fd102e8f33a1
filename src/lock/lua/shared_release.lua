-- uses: common.lua, slots.lua
-- Gives our shared place back (--shared): 1, or 0 when it was not ours (an expired place of
-- ours, or its tombstone, is cleared all the same). When no place is left, wakes the first
-- waiter: only then can one that wants the lock alone take it (a waiter that shares is never
-- kept out by places, and the shared holders it follows wake it: shared_acquire.lua).
-- Removing the place and waking the waiter are one step: a waiter that looked between the two
-- would find the place, and sleep past a wake-up already sent.
-- A release sent again (the reply to the first was lost) finds the first in ENDS (common.lua):
-- 1 again, and nothing changes.
local shared, values, queue, alive, ends = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local phases = KEYS[6]  -- our run's phase (keep_phase) goes with the place
local token, wake_prefix = ARGV[1], ARGV[2]

local now = now_ms()
redis.call('HDEL', phases, token)
local s = redis.call('ZSCORE', shared, token)
redis.call('ZREM', shared, token)
redis.call('HDEL', values, token)
local ours = s and tonumber(s) > now
-- Our place broken by `release --force` (break_slots.lua): its tombstone keeps an exclusive
-- holder out until we stopped, and we have.
if not ours and redis.call('ZREM', shared, 'broken-' .. token) == 1 then
  redis.call('HDEL', values, 'broken-' .. token)
elseif not ours then
  return ended(ends, 'release', token, now) and 1 or 0
end
if ours then mark_ended(ends, now, 'release ' .. token) end
expire_holders(shared, values, now)
if redis.call('ZCARD', shared) == 0 then wake_first(queue, alive, wake_prefix, now) end
return ours and 1 or 0
