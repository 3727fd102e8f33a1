-- uses: common.lua
-- Appends a run's entry to the key's history (a capped stream): 1, or 0 when this token's entry
-- is there already. An entry sent again, because the reply to the first was lost with a
-- connection closed under it, finds the first in ENDS (common.lua) and adds nothing: an entry
-- may be re-sent until it is answered, and is recorded once.
-- START, when not '', is the ID of the run's start entry (record_start in common.lua), which
-- this entry replaces: a run is one entry, so --history-length N keeps N runs. Without fields
-- the start is only removed: the lock was taken, but the command never started.
-- A "since" field left empty is the server's clock now (a run that did not take the lock).
-- "~" lets Redis trim whole stream nodes (100 entries): cheap, and about MAX_LENGTH. A short
-- history is trimmed exactly; that is cheap too. RETENTION ms after this entry the history
-- expires (0: kept).
local history, ends = KEYS[1], KEYS[2]
local token, max_length, retention = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local start = ARGV[4]

local now = now_ms()
if ended(ends, 'history', token, now) then return 0 end
if start ~= '' then redis.call('XDEL', history, start) end
if #ARGV < 5 then return 1 end
local fields = {unpack(ARGV, 5)}
for i = 1, #fields - 1, 2 do
  if fields[i] == 'since' and fields[i + 1] == '' then fields[i + 1] = rfc3339(now) end
end
redis.call('XADD', history, 'MAXLEN', max_length > 100 and '~' or '=', max_length, '*',
           unpack(fields))
keep_history(history, retention)
mark_ended(ends, 'history', token, now)
return 1
