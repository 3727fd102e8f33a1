-- uses: common.lua
-- release --force on a (mutex) lock: replaces the holder's value with a tombstone that lives
-- exactly as long as the lock had left, so no one takes the lock while the broken holder may
-- still run. Why that is enough: a holder's lease ends, on its own clock, at most ttl after it
-- sent its last renewal that succeeded, less a drift allowance, and its rlock has stopped its
-- command (SIGKILL) by then; Redis set that renewal's expiry later than it was sent, so it
-- is at or after the holder's end, and PTTL read here counts to it. A renewal arriving after
-- this script finds the tombstone, not its token, and changes nothing. The tombstone thus ends
-- when the lock would have expired had its holder frozen, the case every lease already covers;
-- its holder's rlock ends it sooner, once its command has stopped (release.lua).
--
-- NOW ('1'): delete instead (an operator who knows the holder is dead), and wake the first
-- waiter. TOKEN (if not ''): only the lock that token holds.
-- Returns {type} for a key that is not a string (left alone), else {type, value, pttl, what}:
-- what is 'broken', 'deleted', 'already' (a tombstone, left), 'other' (TOKEN does not hold it)
-- or 'no-expiry' (no lease bounds the holder: left alone, unless NOW).
local lock, queue, alive = KEYS[1], KEYS[2], KEYS[3]
local wake_prefix, breaker, token, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1'
-- When it was broken is the server's clock, as every time rlock records (common.lua).
breaker = string.gsub(breaker, ' broken_at=[^ ]*', ' broken_at=' .. rfc3339(now_ms()), 1)

local t = redis.call('TYPE', lock)['ok']
if t ~= 'string' then return {t} end
local v = redis.call('GET', lock)
local pttl = redis.call('PTTL', lock)
local tombstone = string.sub(v, 1, 15) == 'rlock/1 broken '
if token ~= '' and string.sub(v, 1, 9 + #token) ~= 'rlock/1 ' .. token .. ' '
    and string.sub(v, 1, 16 + #token) ~= 'rlock/1 broken ' .. token .. ' ' then
  return {t, v, pttl, 'other'}
end
if now then
  redis.call('DEL', lock)
  wake_first(queue, alive, wake_prefix, now_ms())
  return {t, v, pttl, 'deleted'}
end
if tombstone then return {t, v, pttl, 'already'} end
if pttl < 0 then return {t, v, pttl, 'no-expiry'} end
local was = '-'
if string.sub(v, 1, 8) == 'rlock/1 ' then was = string.sub(v, 9) end
redis.call('SET', lock, 'rlock/1 broken ' .. was .. breaker, 'PX', math.max(pttl, 1))
return {t, v, pttl, 'broken'}
