-- uses: common.lua
-- Gives our lock back and wakes the first waiter: 1, or 0 when it was not ours (no change, but
-- for the tombstone of our lock broken by force, below).
-- Compare-then-DEL in one step: a plain DEL (or GET then DEL) can delete the lock of the holder
-- who took over after ours expired.
-- A release sent again (the reply to the first was lost) finds the first in ENDS: 1 again, and
-- nothing changes, even when the lock is someone else's by now.
local lock, queue, alive, ends = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner_prefix, wake_prefix = ARGV[1], ARGV[2]
local token = string.sub(owner_prefix, 9, -2)

-- A tombstone of our lock, broken by `release --force` (break_lock.lua), waits for us to stop:
-- we have, so the next holder need not wait out the rest of our lease. Not ours still: 0.
local broken = 'rlock/1 broken ' .. string.sub(owner_prefix, 9)

local now = now_ms()
local v = redis.pcall('GET', lock)
local ours = 0
if type(v) == 'string' and string.sub(v, 1, #owner_prefix) == owner_prefix then
  ours = 1
elseif type(v) ~= 'string' or string.sub(v, 1, #broken) ~= broken then
  return ended(ends, 'release', token, now) and 1 or 0
end
redis.call('DEL', lock)
if ours == 1 then mark_ended(ends, 'release', token, now) end
wake_first(queue, alive, wake_prefix, now)
return ours
