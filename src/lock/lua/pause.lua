-- uses: common.lua
-- rlock pause: nobody takes the lock until the pause ends (pause.h; the acquire scripts look:
-- paused() in common.lua). TEXT's at= and until= become the server's clock: now, and now + MS
-- (HOW 'for') or MS itself, ms since the epoch (HOW 'until'). The key expires at the end, so
-- a pause leaves nothing behind; a new pause replaces the one before.
-- Returns {1, text, pttl, the pause it replaced or '', whether the lock is held now (1/0), the
-- replaced pause's time left in ms}, or {0, now} when the end is not after now.
local pause, lock, sem, shared = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local text, how, ms = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = now_ms()
local ends = ms
if how == 'for' then ends = now + ms end
if ends <= now then return {0, now} end
text = string.gsub(text, ' at=[^ ]*', ' at=' .. rfc3339(now), 1)
text = string.gsub(text, ' until=[^ ]*', ' until=' .. rfc3339(ends), 1)
local was = redis.call('GET', pause) or ''
local was_ms = redis.call('PTTL', pause)
redis.call('SET', pause, text, 'PX', ends - now)
-- Held by a run of rlock's (not a tombstone, nor another program's key): it goes on.
local v = redis.pcall('GET', lock)
local held = (type(v) == 'string' and string.match(v, '^rlock/1 %x+ ') ~= nil)
    or redis.call('EXISTS', sem, shared) > 0
held = held and 1 or 0
return {1, text, ends - now, was, held, was_ms}
