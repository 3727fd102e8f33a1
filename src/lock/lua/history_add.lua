-- uses: common.lua
-- Appends a run's entry to the key's history (a capped stream): 1, or 0 when this token's entry
-- is there already. An entry sent again, because the reply to the first was lost with a
-- connection closed under it, finds the first in ENDS (common.lua) and adds nothing: an entry
-- may be re-sent until it is answered, and is recorded once.
-- "~" lets Redis trim whole stream nodes (100 entries): cheap, and about MAX_LENGTH. A short
-- history is trimmed exactly; that is cheap too. RETENTION ms after this entry the history
-- expires (0: kept).
local history, ends = KEYS[1], KEYS[2]
local token, max_length, retention = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

local now = now_ms()
if ended(ends, 'history', token, now) then return 0 end
redis.call('XADD', history, 'MAXLEN', max_length > 100 and '~' or '=', max_length, '*',
           unpack(ARGV, 4))
if retention > 0 then
  redis.call('PEXPIRE', history, retention)
else
  redis.call('PERSIST', history)
end
mark_ended(ends, 'history', token, now)
return 1
