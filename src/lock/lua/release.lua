-- uses: common.lua
-- Gives our lock back and wakes the first waiter: 1, or 0 when it was not ours (no change, but
-- for the tombstone of our lock broken by force, below).
-- Compare-then-DEL in one step: a plain DEL (or GET then DEL) can delete the lock of the holder
-- who took over after ours expired.
-- A release sent again (the reply to the first was lost) finds the first in ENDS: 1 again, and
-- nothing changes, even when the lock is someone else's by now.
-- Our run's phase in PHASES (KEYS[5], keep_phase) goes with the lock.
-- With HISTORY (KEYS[6]; KEYS[7] the newest success's entry) the run's entry rides along, so that the end of a run is one script:
-- ARGV from 3 on are history_add.lua's, and the reply is {1 or 0, history_add's reply}, an
-- error there (a history of another type, a full memory) in its place: the release stands.
local lock, queue, alive, ends, phases = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local history, last_success = KEYS[6], KEYS[7]
local owner_prefix, wake_prefix = ARGV[1], ARGV[2]
local token = string.sub(owner_prefix, 9, -2)

-- A tombstone of our lock, broken by `release --force` (break_lock.lua), waits for us to stop:
-- we have, so the next holder need not wait out the rest of our lease. Not ours still: 0.
local broken = 'rlock/1 broken ' .. string.sub(owner_prefix, 9)

local now = now_ms()
local marks = {}  -- the ends this script applies (mark_ended), recorded together at its end
local function release()
  local v = redis.pcall('GET', lock)
  local ours = 0
  if type(v) == 'string' and string.sub(v, 1, #owner_prefix) == owner_prefix then
    ours = 1
  elseif type(v) ~= 'string' or string.sub(v, 1, #broken) ~= broken then
    return ended(ends, 'release', token, now) and 1 or 0
  end
  redis.call('DEL', lock)
  if ours == 1 then marks[1] = 'release ' .. token end
  wake_first(queue, alive, wake_prefix, now)
  return ours
end

local released = release()
redis.call('HDEL', phases, token)
local reply = released
if history then
  -- Our lock, found and released just now (its end marked above): no earlier delivery of
  -- this script ran, which would have released it, so none added the entry either.
  local first_time = marks[1] ~= nil
  local ok, entry, mark = pcall(add_history, history, ends, ARGV, 3, now, first_time,
                                  last_success)
  if not ok then
    entry = type(entry) == 'table' and entry or {err = tostring(entry)}
  end
  if mark then marks[#marks + 1] = mark end
  reply = {released, entry}
end
if #marks > 0 then mark_ended(ends, now, unpack(marks)) end
return reply
