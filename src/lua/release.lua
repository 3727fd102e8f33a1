-- uses: common.lua
-- Gives our lock back and wakes the first waiter: 1, or 0 when it was not ours (no change).
-- Compare-then-DEL in one step: a plain DEL (or GET then DEL) can delete the lock of the holder
-- who took over after ours expired.
local lock, queue, alive = KEYS[1], KEYS[2], KEYS[3]
local owner_prefix, wake_prefix = ARGV[1], ARGV[2]

local v = redis.pcall('GET', lock)
if type(v) == 'string' and string.sub(v, 1, #owner_prefix) == owner_prefix then
  redis.call('DEL', lock)
  wake_first(queue, alive, wake_prefix, now_ms())
  return 1
end
return 0
