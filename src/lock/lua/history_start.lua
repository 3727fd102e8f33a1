-- uses: common.lua
-- The start of the next attempt of a run (--retry), recorded as the attempt begins while the
-- run holds the lock: end=running, replaced by the attempt's end (history_add.lua), so that an
-- attempt whose rlock dies is in the history as such (record_start in common.lua). ARGV: the
-- run's fence, the history's length, its retention, then the entry's fields. Returns the
-- entry's ID ('' when none is kept). Sent again after a lost reply, it finds the first among
-- the newest entries (started_entry): the attempt before has ended, so the run has no other.
local fence = tonumber(ARGV[1])
local id = started_entry(KEYS[1], ARGV, 2, fence)
if id ~= '' then return id end
return record_start(KEYS[1], ARGV, 2, fence, now_ms())
