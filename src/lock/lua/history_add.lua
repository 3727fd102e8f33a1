-- uses: common.lua
-- Appends a run's entry to the key's history (a capped stream): 1, or 0 when this token's entry
-- is there already. An entry sent again, because the reply to the first was lost with a
-- connection closed under it, finds the first in ENDS (common.lua) and adds nothing: an entry
-- may be re-sent until it is answered, and is recorded once. ARGV: token, history length,
-- retention, start, fields (add_history in common.lua). KEYS: the history, the ends, and the
-- newest success's entry (optional; add_history keeps it).
-- START, when not '', is the ID of the run's start entry (record_start in common.lua), which
-- this entry replaces: a run is one entry, so --history-length N keeps N runs. Without fields
-- the start is only removed: the lock was taken, but the command never started.
-- A "since" field left empty is the server's clock now (a run that did not take the lock).
-- "~" lets Redis trim whole stream nodes (100 entries): cheap, and about MAX_LENGTH. A short
-- history is trimmed exactly; that is cheap too. RETENTION ms after this entry the history
-- expires (0: kept).
local now = now_ms()
local added, mark = add_history(KEYS[1], KEYS[2], ARGV, 1, now, false, KEYS[3])
if mark then mark_ended(KEYS[2], now, mark) end
return added
